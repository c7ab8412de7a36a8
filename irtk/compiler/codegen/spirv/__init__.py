"""The vulkan-spirv code generator: dispatch kernels to validated SPIR-V compute shaders.

`compile_kernel` turns one `irtk.compiler.kernel.Kernel` into a `SpirvKernel` (the module,
already checked with spirv-val for the profile's environment, plus its launch shape and
interface); `pack_executable` bundles kernels into the "vulkan-spirv-fb" executable that
hal_vulkan loads; `target.CODEGEN` is both as the compiler driver calls them. Codegen never
talks to a device. See docs/codegen_spirv.md.
"""
from irtk.compiler.codegen.spirv.elementwise import LaunchPlan, plan_launch
from irtk.compiler.codegen.spirv.executable import (SpirvKernel, merged_requirements,
                                                    pack_executable)
from irtk.compiler.codegen.spirv.op_table import SPIRV_OPS
from irtk.compiler.codegen.spirv.strategy import STRATEGIES, compile_kernel

__all__ = ["LaunchPlan", "SpirvKernel", "SPIRV_OPS", "STRATEGIES",
           "compile_kernel",
           "merged_requirements", "pack_executable", "plan_launch"]
