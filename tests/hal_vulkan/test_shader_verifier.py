"""The shader verifier: an executable's declaration must agree with its SPIR-V.

Each case is a compiled executable with one field (or one SPIR-V word) changed, as a hostile or
broken module file would have it; before the verifier, each crashed a software driver or
computed wrong values. The refusal is a VerificationError naming the entry point and the field,
and comes before any Vulkan object is made."""
from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from irtk.errors import VerificationError
from hal_vulkan import requirements, shader_verifier
from hal_vulkan.executable_def import parse_executable
from schemas import vulkan_executable as ve
from tests.hal_vulkan import executable_fuzzing as fuzzing
from tests.hal_vulkan.kernels import MUL_ADD, assemble, pack_executable

ROOT = Path(__file__).resolve().parents[2]


def sample(name: str) -> fuzzing.Sample:
    return next(s for s in fuzzing.samples() if s.name == name)


def changed(name: str, change: Callable[[Any], None]) -> bytes:
    root = ve.ExecutableDefT.InitFromPackedBuf(sample(name).data, 0)
    change(root)
    return fuzzing._pack(root)


def able(info: Any) -> Any:
    """The device's description with every optional feature, so the verifier alone decides."""
    return dataclasses.replace(info, texel_array_indexing=True, float16=True, float64=True,
                               int64=True)


def refused(device: Any, data: bytes, match: str) -> None:
    """Refused by the verifier, naming `match`, with no Vulkan object made."""
    with pytest.raises(VerificationError, match=match):
        shader_verifier.verify(parse_executable(data), able(device.info))
    if requirements.problems(parse_executable(data), device.info):
        return  # the device lacks a feature the executable needs: refused before the verifier
    before = device.live_objects()
    with pytest.raises(VerificationError):
        device.create_executable("vulkan-spirv-fb", data)
    assert device.live_objects() == before


def _set_code(root: Any, code: np.ndarray) -> None:
    root.shaderModules[0].code = code


def _local_size(root: Any, size: tuple[int, int, int]) -> None:
    code = np.array(root.shaderModules[0].code, dtype="<u4")
    pos = 5
    while pos < len(code):
        count, opcode = int(code[pos]) >> 16, int(code[pos]) & 0xFFFF
        if opcode == 16 and int(code[pos + 2]) == 17:  # OpExecutionMode %f LocalSize
            code[pos + 3:pos + 6] = size
        pos += count
    _set_code(root, code)


def _result_id_word(root: Any) -> None:
    """The result id of the first OpTypeVoid (a small id) becomes 0x80000000."""
    code = np.array(root.shaderModules[0].code, dtype="<u4")
    pos = 5
    while int(code[pos]) & 0xFFFF != 19:  # OpTypeVoid
        pos += int(code[pos]) >> 16
    code[pos + 1] = 0x80000000
    _set_code(root, code)


def _entry(root: Any) -> Any:
    return root.entryPoints[0]


def test_compiled_executables_pass(device):
    for s in fuzzing.samples():
        shader_verifier.verify(parse_executable(s.data), able(device.info))


CASES: list[tuple[str, str, Callable[[Any], None], str]] = [
    ("a SPIR-V result id of 0x80000000", "add-default", _result_id_word,
     r"shader_modules\[0\] is not valid SPIR-V for vulkan1\.\d"),
    ("an entry point name the shader lacks", "add-default",
     lambda r: setattr(_entry(r), "name", "main"),
     r"entry point 'main' \(entry_points\[0\]\)\.name: shader module 0 has no GLCompute entry "
     r"point of that name \(it has \['main_dispatch_0_elementwise'\]\)"),
    ("no declared bindings", "add-default", lambda r: setattr(_entry(r), "bindings", []),
     r"the shader's storage buffer at set 0, binding 0 is not declared \(declared bindings: "
     r"\[\]\)"),
    ("a binding renumbered to one the shader does not use", "add-default",
     lambda r: setattr(_entry(r).bindings[0], "binding", 5),
     r"the shader's storage buffer at set 0, binding 0 is not declared"),
    ("a storage buffer declared as a texel buffer", "add-default",
     lambda r: setattr(_entry(r).bindings[0], "kind", ve.BindingKind.UniformTexelBuffer),
     r"\.bindings\[0\]\.kind: declared a uniform texel buffer, the shader reads binding 0 as a "
     r"storage buffer"),
    ("a texel buffer declared as a storage buffer", "add-llvmpipe",
     lambda r: setattr(_entry(r).bindings[1], "kind", ve.BindingKind.StorageBuffer),
     r"\.bindings\[1\]\.kind: declared a storage buffer, the shader reads binding 1 as a "
     r"uniform texel buffer"),
    ("the shader's LocalSize above every limit", "add-default",
     lambda r: _local_size(r, (1024, 1024, 64)),
     r"\.workgroup_size: declared \(\d+, 1, 1\), the shader's LocalSize is \(1024, 1024, 64\)"),
    ("no push constants for a shader that reads one", "dynamic-add-default",
     lambda r: setattr(_entry(r), "pushConstantCount", 0),
     r"\.push_constant_count: declared 0 words, the shader reads 4 bytes of push constants"),
    ("fewer texel windows than the shader's array", "row-sum-windows",
     lambda r: setattr(_entry(r).bindings[0], "windowCount",
                       _entry(r).bindings[0].windowCount // 2),
     r"\.bindings\[0\]\.window_count: declared \d+ descriptor\(s\), the shader's binding 0 is "
     r"\d+ descriptor\(s\)"),
    ("the output declared read-only", "add-default",
     lambda r: setattr(_entry(r).bindings[2], "readOnly", True),
     r"\.bindings\[2\]\.read_only: declared read-only, the shader may write binding 2"),
    ("workgroup memory above the declared amount", "row-sum-windows",
     lambda r: setattr(r.requirements, "sharedMemoryBytes", 0),
     r"the shader uses \d+ bytes of workgroup memory, the executable declares 0 "
     r"\(requirements\.shared_memory_bytes\)"),
]


@pytest.mark.parametrize("what,name,change,message", CASES, ids=[c[0] for c in CASES])
def test_a_declaration_that_disagrees_with_its_shader_is_refused(device, what, name, change,
                                                                 message):
    refused(device, changed(name, change), message)


def test_a_binding_number_no_driver_can_lay_out_is_malformed():
    data = changed("add-default", lambda r: setattr(_entry(r).bindings[2], "binding",
                                                    0xFFFFFFFF))
    with pytest.raises(VerificationError, match=r"bindings\[2\]\.binding: 4294967295 is above "
                                                r"the largest binding number allowed"):
        parse_executable(data)


def test_a_workgroup_size_with_a_zero_is_malformed():
    data = changed("add-default", lambda r: setattr(_entry(r), "workgroupSize", [64, 0, 1]))
    with pytest.raises(VerificationError, match=r"workgroup_size: expected 3 positive sizes"):
        parse_executable(data)


def test_a_declared_binding_the_shader_ignores_is_allowed(device):
    def extra(root: Any) -> None:
        b = ve.BindingDefT()
        b.binding = 3
        _entry(root).bindings.append(b)
    shader_verifier.verify(parse_executable(changed("add-default", extra)), device.info)


def _mul_add(extra_capabilities: str = "", memory_model: str = "Logical GLSL450",
             extension: str = "") -> str:
    text = MUL_ADD.replace("{wg}", "64").replace(
        "OpMemoryModel Logical GLSL450", f"{extension}OpMemoryModel {memory_model}")
    return text.replace("OpCapability Shader", "OpCapability Shader" + extra_capabilities)


def test_a_capability_the_requirements_do_not_declare_is_refused(device):
    code = assemble(_mul_add("\n OpCapability Float64").replace(
        "%float = OpTypeFloat 32", "%float = OpTypeFloat 32\n %double = OpTypeFloat 64"))
    with pytest.raises(VerificationError, match=r"shader_modules\[0\] declares capability "
                                                r"Float64, but the executable's requirements "
                                                r"do not declare float64"):
        shader_verifier.verify(parse_executable(pack_executable(code)), device.info)
    shader_verifier.verify(parse_executable(pack_executable(code, float64=True)), device.info)


def test_a_capability_the_driver_does_not_enable_is_refused(device):
    code = assemble(_mul_add("\n OpCapability Int64Atomics\n OpCapability Int64"))
    with pytest.raises(VerificationError, match=r"declares capability Int64Atomics, which the "
                                                r"Vulkan driver does not enable"):
        shader_verifier.verify(parse_executable(pack_executable(code, int64=True)),
                               device.info)


def test_buffer_device_addresses_are_refused(device):
    text = _mul_add("\n OpCapability PhysicalStorageBufferAddresses",
                    "PhysicalStorageBuffer64 GLSL450",
                    'OpExtension "SPV_KHR_physical_storage_buffer"\n')
    # From SPIR-V 1.4 an entry point lists every global variable it uses.
    text = text.replace('"mul_add" %gid', '"mul_add" %gid %a %b %c %consts').replace(
        '"scale" %gid', '"scale" %gid %a %consts')
    code = assemble(text, "vulkan1.2")
    data = pack_executable(code, spirvVersion=0x10500)
    with pytest.raises(VerificationError, match=r"addressing model PhysicalStorageBuffer64; "
                                                r"the Vulkan driver enables only Logical"):
        shader_verifier.verify(parse_executable(data), device.info)


def test_subgroup_operations_the_device_lacks_are_refused(device):
    code = assemble(_mul_add("\n OpCapability GroupNonUniform\n OpCapability "
                             "GroupNonUniformQuad"))
    info = dataclasses.replace(device.info, extra={**device.info.extra,
                                                   "subgroupSupportedOperations": "1"})
    with pytest.raises(VerificationError, match=r"declares capability GroupNonUniformQuad; "
                                                r"device '.*' has no quad subgroup operations"):
        shader_verifier.verify(parse_executable(pack_executable(code)), info)


def test_the_validation_verdict_is_remembered_by_hash(device):
    data = changed("add-default", _result_id_word)
    code = parse_executable(data).shader_modules[0]
    env = shader_verifier.target_env(device.info)
    first = shader_verifier.validation_problem(code, env)
    assert first is not None
    assert shader_verifier.validation_problem(code, env) is first


def test_the_target_environment_follows_the_device_api():
    info = fuzzing_info("1.3.250")
    assert shader_verifier.target_env(info) == "vulkan1.3"
    assert shader_verifier.target_env(fuzzing_info("1.1.0")) == "vulkan1.1"
    assert shader_verifier.target_env(fuzzing_info("1.9.0")) == "vulkan1.4"


def fuzzing_info(api: str) -> Any:
    from irtk.hal import DeviceInfo
    return DeviceInfo(driver="vulkan", name="x", api_version=api)


# -- fuzzing ------------------------------------------------------------------------------------

def _campaign(device_index: int, count: int, seed: int, tmp_path: Path) -> None:
    """Run the campaign in a child process (a crash cannot be caught here); a crashing input
    is saved to the corpus and named in the failure."""
    current = tmp_path / "current.irvk"
    proc = subprocess.run([sys.executable, "-m", "tests.hal_vulkan.executable_fuzzing",
                           str(device_index), str(count), str(seed), str(current)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0 and current.exists():
        name, data = current.read_bytes().split(b"\n", 1)
        saved = fuzzing.save(sample(name.decode()), data)
        pytest.fail(f"the driver died (status {proc.returncode}) on {saved.name}:\n"
                    f"{proc.stderr[-3000:]}")
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_fuzzed_executables_never_crash_the_driver(device_index, tmp_path):
    _campaign(device_index, 150, device_index, tmp_path)


@pytest.mark.slow
def test_fuzzed_executables_never_crash_the_driver_at_length(device_index, tmp_path):
    _campaign(device_index, 1500, 1000 + device_index, tmp_path)


@pytest.mark.parametrize("path", sorted(fuzzing.CORPUS.glob("*.irvk")), ids=lambda p: p.name)
def test_inputs_that_found_bugs_are_refused_or_run(device, path):
    fuzzing.exercise(device, fuzzing.corpus_sample(path), path.read_bytes())


def test_a_clean_message_names_the_field_without_internal_text(device):
    data = changed("add-default", lambda r: setattr(_entry(r), "pushConstantCount", 0))
    shader_verifier.verify(parse_executable(data), device.info)  # no push constant read
    bad = changed("add-default", lambda r: setattr(_entry(r).bindings[0], "binding", 9))
    with pytest.raises(VerificationError) as info:
        device.create_executable("vulkan-spirv-fb", bad)
    assert re.search(r"vulkan-spirv-fb executable \(target '\w+'\): entry point "
                     r"'main_dispatch_0_elementwise' \(entry_points\[0\]\)", str(info.value))
