"""irtk's VM: bytecode modules (loader, verifier), the interpreter and native modules.

Modelled on IREE's VM: a register machine with i32/i64/f32/f64/ref banks whose instruction set
is data (`isa.py`). A module file is verified completely before anything runs and decoded once
into Python closures (straight-line runs fused into one function each); calls that wait on a
fence suspend (`Invocation`, `yielding`). Native modules register the ref types they bring
(`ref_types`); the VM itself knows only `!vm.buffer` and `!vm.list`. Programs also have a text
form (`assembler`, `disassembler`). See docs/vm.md.
"""
from irtk.vm.isa import BYTECODE_VERSION, OPS
from irtk.vm.loader import load_module
from irtk.vm.module import BytecodeModule
from irtk.vm.native_module import NativeFunction, NativeModule
from irtk.vm.interpreter import Context, Invocation, MAX_FRAMES
from irtk.vm.ref_types import RefType
from irtk.vm.refs import VMBuffer, VMList
from irtk.vm.yielding import FenceWait, Wait

__all__ = ["BYTECODE_VERSION", "OPS", "load_module", "BytecodeModule", "NativeFunction",
           "NativeModule", "Context", "Invocation", "MAX_FRAMES", "RefType", "VMBuffer", "VMList",
           "Wait", "FenceWait"]
