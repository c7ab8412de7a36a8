"""The vulkan-spirv target's code generator, as the compiler driver calls it
(irtk/compiler/target_backends.py): SPIR-V per kernel, packed into a "vulkan-spirv-fb"
executable, and the `--dump-spirv` files."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from irtk.compiler.codegen import Codegen, Launch
from irtk.compiler.codegen.spirv.executable import SpirvKernel, pack_executable
from irtk.compiler.codegen.spirv.strategy import compile_kernel
from irtk.compiler.kernel import Kernel
from irtk.compiler.targets import VulkanProfile
from irtk.errors import InputError


class SpirvCodegen(Codegen):
    def compile_kernel(self, kernel: Kernel, profile: VulkanProfile) -> SpirvKernel:
        return compile_kernel(kernel, profile)

    def pack_executable(self, kernels: Sequence[Kernel], compiled: Sequence[SpirvKernel],
                        profile: VulkanProfile) -> tuple[bytes, list[Launch]]:
        return pack_executable(list(compiled), profile), [_launch(k) for k in compiled]

    def dump(self, folder: str, kernels: Sequence[Kernel],
             compiled: Sequence[SpirvKernel]) -> None:
        """`<kernel>.spv` and its disassembly `<kernel>.spvasm` per kernel."""
        from spirv.reader import disassemble
        out = Path(folder)
        try:
            out.mkdir(parents=True, exist_ok=True)
            for k, c in zip(kernels, compiled):
                (out / f"{k.name}.spv").write_bytes(c.code)
                (out / f"{k.name}.spvasm").write_text(disassemble(c.code))
        except OSError as e:
            raise InputError(f"cannot write SPIR-V to '{folder}': {e.strerror}") from None


def _launch(kernel: SpirvKernel) -> Launch:
    if kernel.grid is not None:
        return kernel.grid
    x, y, z = kernel.workgroup_count
    return (x, y, z)


CODEGEN = SpirvCodegen()
