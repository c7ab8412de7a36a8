"""Every backend covers every body op it claims, on every type it claims, and refuses the rest.

`irtk.body_ops` declares the kernel IR's ops once; the SPIR-V generator, the CPU drivers' numpy
executor and the VM code generator (host scalars) register implementations with the types they
handle. Here each declared op is compiled on every signature its type rule accepts: a claimed
signature must compile (SPIR-V: to a module spirv-val accepts, on a profile with every
optional type), an unclaimed one must be refused by name, never crash or emit invalid code.
"""
from __future__ import annotations

import pytest

from hal_cpu.ops import NUMPY, OpAttrs, OpError, compile_op
from irtk import body_ops
from irtk.compiler import host_arith, tir
from irtk.compiler.codegen.spirv import SPIRV_OPS, compile_kernel
from irtk.compiler.kernel import AffineMap, Kernel, Op, Operand
from irtk.compiler.targets import VULKAN_PROFILES
from irtk.errors import CompileError
from irtk.types import SCALAR_TYPES
from irtk.vm.writer import FunctionBuilder, Reg

RULE_OPS = sorted(name for name in body_ops.OPS if name not in body_ops.EXECUTOR_OPS)
BACKENDS = {"cpu": NUMPY, "vulkan-spirv": SPIRV_OPS, "vm": host_arith.HOST_OPS}


def _predicate(name: str) -> str | None:
    return {"arith.cmpf": "oeq", "arith.cmpi": "eq"}.get(name)


def test_the_declarations_name_every_op_once_and_every_rule_is_used():
    assert len(body_ops.OPS) == len(body_ops._DECLARATIONS)
    assert {op.rule.name for op in body_ops.OPS.values()} == set(body_ops.RULES)
    assert all(op.semantics for op in body_ops.OPS.values())


@pytest.mark.parametrize("backend", BACKENDS.values(), ids=BACKENDS.keys())
def test_backends_register_only_declared_ops(backend):
    assert backend.names <= body_ops.NAMES
    with pytest.raises(KeyError, match="not a declared body op"):
        backend.register("math.cbrt_nonexistent", object())


def test_the_reference_and_the_spirv_generator_implement_every_op():
    assert NUMPY.names == body_ops.NAMES
    assert SPIRV_OPS.names == body_ops.NAMES


@pytest.mark.parametrize("backend", BACKENDS.values(), ids=BACKENDS.keys())
def test_each_signature_has_one_implementation_per_backend(backend):
    for name in body_ops.OPS:
        for operands, result in body_ops.signatures(name):
            assert len(backend.candidates(name, operands, result)) <= 1, (name, operands, result)


def test_infer_states_what_does_not_fit():
    assert body_ops.infer("arith.addf", ["f16", "f16"]) == "f16"
    assert body_ops.infer("arith.cmpi", ["i8", "i8"], predicate="ult") == "i1"
    with pytest.raises(body_ops.OpTypeError, match=r"\(f32, i32\) are not one float type"):
        body_ops.infer("arith.addf", ["f32", "i32"])
    with pytest.raises(body_ops.OpTypeError, match="cannot cast f32 to f16"):
        body_ops.infer("arith.extf", ["f32"], "f16")
    with pytest.raises(body_ops.OpTypeError, match="has 1 operands, expected 2"):
        body_ops.infer("arith.subi", ["i32"])
    with pytest.raises(body_ops.OpTypeError, match="unsupported op"):
        body_ops.infer("math.cbrt", ["f32"])
    with pytest.raises(body_ops.OpTypeError, match="int_value 300 does not fit in i8"):
        body_ops.infer("arith.constant", [], "i8", int_value=300)


@pytest.mark.parametrize("name", RULE_OPS)
def test_cpu_reference_compiles_every_signature(name):
    for operands, result in body_ops.signatures(name):
        attrs = OpAttrs(name, result, _predicate(name), 1, 1.5)
        if NUMPY.supports(name, operands, result):
            fn, inferred = compile_op(attrs, list(operands))
            assert inferred == result and callable(fn)
        else:
            with pytest.raises(OpError, match=name):
                compile_op(attrs, list(operands))


def _kernel(name: str, operands: tuple[str, ...], result: str) -> Kernel:
    ident = AffineMap.identity(1)
    inputs = [Operand(i, t, (8,), ident) for i, t in enumerate(operands)]
    output = Operand(len(operands), result, (8,), ident)
    op = Op(name, tuple(range(len(operands))), result, _predicate(name) or "", 1, 1.5)
    return Kernel("k", (8,), inputs, [output], [op], [len(operands) + 1], ("parallel",))


# Words a refusal for a missing device type uses (the profile lacks it; the op is claimed).
_MISSING_TYPE = ("shaderFloat64", "shaderInt64", "needs 64-bit")


@pytest.mark.parametrize("name", RULE_OPS)
def test_spirv_compiles_every_claimed_signature_and_refuses_the_rest(name):
    full, default = VULKAN_PROFILES["llvmpipe"], VULKAN_PROFILES["default"]
    for operands, result in body_ops.signatures(name):
        kernel = _kernel(name, operands, result)
        if SPIRV_OPS.supports(name, operands, result):
            compile_kernel(kernel, full)    # validated with spirv-val inside
            try:
                compile_kernel(kernel, default)
            except CompileError as e:
                assert any(w in str(e) for w in _MISSING_TYPE), (operands, result, str(e))
        else:
            for profile in (full, default):
                with pytest.raises(CompileError, match="not supported|shaderFloat64"):
                    compile_kernel(kernel, profile)


@pytest.mark.parametrize("name", RULE_OPS)
def test_vm_host_lowers_every_claimed_signature_and_refuses_the_rest(name):
    host = host_arith.HOST_OPS
    for operands, result in body_ops.signatures(name):
        b = FunctionBuilder()
        counts: dict[str, int] = {}

        def new(bank: str) -> Reg:
            counts[bank] = counts.get(bank, 0) + 1
            return Reg(bank, counts[bank] - 1)
        args = [new(SCALAR_TYPES[t].vm_bank) for t in operands]
        predicate = _predicate(name)
        op = tir.Op(name, [tir.Value(tir.ScalarType(t)) for t in operands],
                    [tir.Value(tir.ScalarType(result))],
                    {"predicate": predicate} if predicate else {})
        if host.supports(name, operands, result):
            r = host_arith.lower(b, new, op, args, CompileError)
            assert r.bank == SCALAR_TYPES[result].vm_bank
            b.emit("return", [r])
            b.finish()      # every instruction encodes: the VM has the ops used
        else:
            with pytest.raises(CompileError, match="not supported on the host"):
                host_arith.lower(b, new, op, args, CompileError)


def test_the_op_table_in_the_docs_is_fresh():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "scripts" / "body_ops_doc.py"
    spec = importlib.util.spec_from_file_location("body_ops_doc", path)
    assert spec is not None and spec.loader is not None
    docgen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(docgen)
    current = docgen.DOC_PATH.read_text(encoding="utf-8")
    assert docgen.update(current) == current, f"run: {docgen.COMMAND}"
