"""The target registry: `--target` names what is registered, a registered target's executable
lands in the module under its format, and a code generator is imported only for its target."""
from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import irtk
from irtk.compiler import target_backends
from irtk.compiler.codegen import Codegen, Launch
from irtk.compiler.kernel import Kernel
from irtk.compiler.target_backends import TargetBackend
from irtk.compiler.targets import VULKAN_PROFILES
from schemas import CPU_EXECUTABLE_FORMAT, VULKAN_EXECUTABLE_FORMAT
from schemas import bytecode_module as bfb

ROOT = Path(__file__).resolve().parents[2]

ADD = """func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>,
                                        affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]}
      ins(%a, %b : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


class ToyCodegen(Codegen):
    """Names its kernels and the profile it was given, one line each; one workgroup each."""

    def compile_kernel(self, kernel: Kernel, profile: object) -> str:
        return f"{kernel.name} for {profile}"

    def pack_executable(self, kernels: Sequence[Kernel], compiled: Sequence[str],
                        profile: object) -> tuple[bytes, list[Launch]]:
        return "\n".join(compiled).encode(), [(1, 1, 1)] * len(kernels)


TOY_CODEGEN = ToyCodegen()
TOY = TargetBackend("toy", "toy-text", f"{__name__}:TOY_CODEGEN",
                    profile_option="vulkan_target", profile_named=lambda name: f"toy-{name}")


@pytest.fixture
def toy() -> Iterator[TargetBackend]:
    target_backends.register(TOY)
    yield TOY
    target_backends.unregister(TOY.name)


def executables(module: bytes) -> dict[str, bytes]:
    """The module's executables (rodata segments `executable_<target>`): format -> bytes."""
    root = bfb.ModuleDef.GetRootAs(module, 0)
    segments = [root.RodataSegments(i) for i in range(root.RodataSegmentsLength())]
    return {s.MimeType().decode(): s.DataAsNumpy().tobytes() for s in segments
            if s.Name().startswith(b"executable_")}


def test_unknown_target_lists_the_registered_ones(toy):
    with pytest.raises(irtk.CompileError, match="unknown target 'metal'; targets: "
                                                "vulkan-spirv, cpu, toy$"):
        irtk.compile_str(ADD, target="metal")
    with pytest.raises(irtk.CompileError, match="no target given; targets: vulkan-spirv, cpu, toy"):
        irtk.compile_str(ADD, target=" , ")


def test_an_unregistered_target_is_unknown_again(toy):
    target_backends.unregister(toy.name)
    try:
        assert target_backends.target_names() == ["vulkan-spirv", "cpu"]
        with pytest.raises(irtk.CompileError, match="unknown target 'toy'; targets: "
                                                    "vulkan-spirv, cpu$"):
            irtk.compile_str(ADD, target="toy")
    finally:
        target_backends.register(toy)


def test_a_name_is_registered_once(toy):
    with pytest.raises(ValueError, match="target 'toy' is registered already"):
        target_backends.register(toy)


def test_a_registered_target_compiles_into_the_module_under_its_format(toy):
    module = irtk.compile_str(ADD, target="cpu,toy", vulkan_target="llvmpipe")
    found = executables(module)
    assert list(found) == [CPU_EXECUTABLE_FORMAT, "toy-text"]
    assert found["toy-text"] == b"main_dispatch_0_elementwise for toy-llvmpipe"


def test_the_vulkan_profile_reaches_its_code_generator():
    default = executables(irtk.compile_str(ADD, target="vulkan-spirv"))
    llvmpipe = executables(irtk.compile_str(ADD, target="vulkan-spirv", vulkan_target="llvmpipe"))
    assert list(default) == list(llvmpipe) == [VULKAN_EXECUTABLE_FORMAT]
    assert default != llvmpipe
    with pytest.raises(irtk.CompileError, match="unknown Vulkan target 'gpu9'; targets: "
                                                + ", ".join(VULKAN_PROFILES)):
        irtk.compile_str(ADD, target="cpu", vulkan_target="gpu9")


def test_a_codegen_that_is_not_one_is_named():
    bad = TargetBackend("bad", "bad-fb", f"{__name__}:ADD")
    with pytest.raises(TypeError, match=f"target 'bad': {__name__}:ADD is not a Codegen"):
        bad.load_codegen()


def test_the_target_for_a_device_is_the_one_of_its_format(toy):
    assert target_backends.for_formats([VULKAN_EXECUTABLE_FORMAT]).name == "vulkan-spirv"
    assert target_backends.for_formats(("other-fb", CPU_EXECUTABLE_FORMAT)).name == "cpu"
    assert target_backends.for_formats(["toy-text"]) is toy
    assert target_backends.for_formats(["other-fb"]) is None


GENERATORS = ["irtk.compiler.codegen.cpu", "irtk.compiler.codegen.spirv", "spirv.builder"]


@pytest.mark.parametrize("target,loaded", [
    ("cpu", ["irtk.compiler.codegen.cpu"]),
    ("vulkan-spirv", ["irtk.compiler.codegen.spirv", "spirv.builder"]),
])
def test_a_code_generator_is_imported_only_for_its_target(target, loaded):
    """In a fresh process: which code generators compiling for one target loads."""
    script = (f"import sys, irtk\n"
              f"irtk.compile_str({ADD!r}, target={target!r})\n"
              f"print([m for m in {GENERATORS!r} if m in sys.modules])\n")
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == repr(loaded)


def _vulkan_info(**fields):
    from irtk.hal.device import DeviceInfo
    extra = {"device_type": fields.pop("device_type"),
             "maxTexelBufferElements": str(fields.pop("texels", 65536))}
    return DeviceInfo(driver="vulkan", name="test", api_version="1.3.0", extra=extra, **fields)


def test_suited_profile_matches_what_the_device_runs_as_compiled():
    from irtk.compiler.targets import suited_profile
    swiftshader = _vulkan_info(device_type="cpu", subgroup_size=4, max_workgroup_invocations=256)
    lavapipe = _vulkan_info(device_type="cpu", subgroup_size=8, max_workgroup_invocations=1024,
                            float16=True, float64=True, int8=True, int16=True, int64=True)
    gpu = _vulkan_info(device_type="discrete-gpu", subgroup_size=32,
                       max_workgroup_invocations=1024, float16=True, float64=True, int8=True,
                       int16=True, int64=True)
    assert suited_profile(swiftshader) == "swiftshader"
    assert suited_profile(lavapipe) == "llvmpipe"
    assert suited_profile(gpu) == "default"
    # lavapipe without f64, or with another subgroup size: the llvmpipe profile would not run
    assert suited_profile(_vulkan_info(device_type="cpu", subgroup_size=8,
                                       max_workgroup_invocations=1024, float16=True)) == "default"
    assert suited_profile(_vulkan_info(device_type="cpu", subgroup_size=4, texels=4096,
                                       max_workgroup_invocations=256)) == "default"
