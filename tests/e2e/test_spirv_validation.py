"""Every SPIR-V module the compiler writes into a .vmfb passes spirv-val for its target
environment — checked from the module file, independently of the compiler's own check."""
from __future__ import annotations

from pathlib import Path

import pytest

import irtk
from schemas import bytecode_module, vulkan_executable
from spirv import tools
from tests.e2e.programs import CASES, generic_program
from tests.e2e.test_programs import CHAIN

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "elementwise.mlir"
PROGRAMS = {"example": EXAMPLE.read_text(), "chain": CHAIN,
            **{c.name: generic_program(c, (9, 31)) for c in CASES}}


def shader_modules(vmfb: bytes) -> list[bytes]:
    module = bytecode_module.ModuleDef.GetRootAs(vmfb, 0)
    shaders = []
    for i in range(module.RodataSegmentsLength()):
        seg = module.RodataSegments(i)
        if seg.MimeType() == b"vulkan-spirv-fb":
            exe = vulkan_executable.ExecutableDef.GetRootAs(seg.DataAsNumpy().tobytes(), 0)
            shaders += [exe.ShaderModules(m).CodeAsNumpy().tobytes()
                        for m in range(exe.ShaderModulesLength())]
    return shaders


@pytest.mark.parametrize("profile,env", [("default", "vulkan1.1"), ("llvmpipe", "vulkan1.2")])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_emitted_spirv_validates(name, profile, env):
    vmfb = irtk.compile_str(PROGRAMS[name], target="vulkan-spirv", vulkan_target=profile)
    shaders = shader_modules(vmfb)
    assert shaders
    for code in shaders:
        tools.validate(code, env)
