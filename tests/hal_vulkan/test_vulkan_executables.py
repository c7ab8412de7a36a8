"""Executables: requirement checks, malformed files, the persistent pipeline cache."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from irtk.errors import DeviceError, VerificationError
from irtk.hal import DeviceInfo
from hal_vulkan import requirements
from hal_vulkan.executable_def import parse_executable

from tests.hal_vulkan.kernels import mul_add_executable, mul_add_spirv, pack_executable


def create(device, data: bytes):
    return device.create_executable("vulkan-spirv-fb", data)


def refused_without_objects(device, data: bytes, match: str) -> None:
    """The refusal comes before any Vulkan object is made."""
    before = device.live_objects()
    with pytest.raises(DeviceError, match=match):
        create(device, data)
    assert device.live_objects() == before


def test_float16_requirement(device):
    data = mul_add_executable(float16=True)
    if device.info.float16:
        create(device, data).release()
    else:
        refused_without_objects(
            device, data, rf"executable needs shaderFloat16; device '{_re(device.info.name)}' "
                          r"has no 16-bit float support")


@pytest.mark.parametrize("field,feature", [("float64", "shaderFloat64"),
                                           ("int8", "shaderInt8"), ("int16", "shaderInt16"),
                                           ("int64", "shaderInt64")])
def test_other_type_requirements(device, field, feature):
    data = mul_add_executable(**{field: True})
    if getattr(device.info, field):
        create(device, data).release()
    else:
        refused_without_objects(device, data, f"executable needs {feature}; device")


def test_subgroup_size_8_requirement(device):
    data = mul_add_executable(subgroupSize=8, target_profile="llvmpipe")
    if device.info.subgroup_size == 8:
        create(device, data).release()
    else:
        refused_without_objects(
            device, data,
            r"executable was compiled for subgroup size 8 \(target 'llvmpipe'\); "
            rf"device '{_re(device.info.name)}' has subgroup size {device.info.subgroup_size}")


def test_matching_subgroup_size_is_accepted(device):
    create(device, mul_add_executable(subgroupSize=device.info.subgroup_size)).release()


def test_workgroup_larger_than_the_device_allows(device):
    limit = device.info.max_workgroup_invocations
    refused_without_objects(device, mul_add_executable(maxWorkgroupInvocations=2 * limit),
                            rf"needs {2 * limit} invocations per workgroup.*allows {limit} "
                            r"\(maxComputeWorkGroupInvocations\)")
    data = pack_executable(mul_add_spirv(64), entry_workgroup=(2 * limit, 1, 1))
    refused_without_objects(device, data, r"entry point 'mul_add' has workgroup size")


def test_shared_memory_above_the_limit(device):
    limit = device.info.shared_memory_bytes
    refused_without_objects(device, mul_add_executable(sharedMemoryBytes=limit + 4),
                            rf"needs {limit + 4} bytes of shared memory.*"
                            r"\(maxComputeSharedMemorySize\)")


def test_all_missing_features_are_listed_together(device):
    if device.info.float16 or device.info.int64:
        pytest.skip("device has float16 or int64")
    refused_without_objects(device, mul_add_executable(float16=True, int64=True),
                            "shaderFloat16.*; executable needs shaderInt64")


def test_requirements_check_needs_no_vulkan():
    """The check is a pure function of DeviceInfo (usable by tools and other tests)."""
    info = DeviceInfo(driver="vulkan", name="Tiny GPU", api_version="1.2.0", subgroup_size=32,
                      max_workgroup_invocations=128, shared_memory_bytes=16384,
                      extra={"maxPushConstantsSize": "128"})
    spec = parse_executable(mul_add_executable(subgroupSize=64, spirvVersion=0x10600,
                                               sharedMemoryBytes=20000))
    found = requirements.problems(spec, info)
    assert "executable was compiled for subgroup size 64 (target 'test'); device 'Tiny GPU' " \
           "has subgroup size 32" in found
    assert any("SPIR-V 1.6" in p and "accepts up to 1.5" in p for p in found)
    assert any("20000 bytes of shared memory" in p for p in found)
    ok = dataclasses.replace(info, subgroup_size=64, shared_memory_bytes=32768,
                             api_version="1.3.0")
    assert requirements.problems(spec, ok) == []


def test_unknown_format_is_refused(device):
    with pytest.raises(DeviceError, match="cannot load executable format 'cpu-fb'"):
        device.create_executable("cpu-fb", mul_add_executable())


# -- malformed files ----------------------------------------------------------------------------
def test_wrong_identifier():
    data = bytearray(mul_add_executable())
    data[4:8] = b"IRTK"
    with pytest.raises(VerificationError, match="file_identifier: expected b'IRVK'"):
        parse_executable(bytes(data))


def test_too_short():
    with pytest.raises(VerificationError, match="too short"):
        parse_executable(b"IRVK")


def test_truncated_file_names_a_field():
    data = mul_add_executable()
    with pytest.raises(VerificationError, match="malformed"):
        parse_executable(data[: len(data) // 2])


def test_code_that_is_not_spirv():
    data = pack_executable(b"\x00" * 64)
    with pytest.raises(VerificationError, match=r"shader_modules\[0\]\.code: is not SPIR-V"):
        parse_executable(data)


def test_entry_point_with_a_bad_module_index():
    from schemas import vulkan_executable as ve
    import flatbuffers

    root = ve.ExecutableDefT.InitFromPackedBuf(mul_add_executable(), 0)
    root.entryPoints[1].shaderModule = 3
    builder = flatbuffers.Builder(0)
    builder.Finish(root.Pack(builder), file_identifier=b"IRVK")
    with pytest.raises(VerificationError, match=r"entry_points\[1\]\.shader_module: index 3"):
        parse_executable(bytes(builder.Output()))


def test_workgroup_size_needs_three_dimensions():
    data = pack_executable(mul_add_spirv(), entry_workgroup=(64, 1))  # type: ignore[arg-type]
    with pytest.raises(VerificationError, match=r"entry_points\[0\]\.workgroup_size"):
        parse_executable(data)


def test_corrupted_bytes_never_escape_as_other_errors(rng):
    """Random byte flips either still parse or raise VerificationError, nothing else."""
    good = mul_add_executable()
    for _ in range(300):
        data = bytearray(good)
        for pos in rng.integers(0, len(data), rng.integers(1, 6)):
            data[pos] = int(rng.integers(0, 256))
        try:
            parse_executable(bytes(data))
        except VerificationError:
            pass


def test_malformed_executable_is_refused_by_the_device(device):
    with pytest.raises(VerificationError):
        create(device, b"\x10\x00\x00\x00IRVK" + b"\xff" * 24)


# -- pipeline cache -----------------------------------------------------------------------------
def test_pipeline_cache_is_written_and_survives_corruption(driver, device_index, tmp_path,
                                                           monkeypatch, rng):
    from hal_vulkan.pipeline_cache import cache_dir

    monkeypatch.setenv("IRTK_CACHE_DIR", str(tmp_path))
    assert cache_dir() == tmp_path / "vulkan"
    data = mul_add_executable()
    device = driver.create_device(device_index)
    try:
        create(device, data).release()
        files = list((tmp_path / "vulkan").glob("*.bin"))
        assert len(files) == 1 and files[0].stat().st_size > 0
        assert device.physical.device_uuid.hex() in files[0].name
    finally:
        device.release()
    for garbage in (b"", b"junk", files[0].read_bytes()[:40],
                    bytes(rng.integers(0, 256, 4096, dtype=np.uint8))):
        files[0].write_bytes(garbage)
        device = driver.create_device(device_index)
        try:
            create(device, data).release()
        finally:
            device.release()
    device = driver.create_device(device_index)  # and the good file written last loads again
    try:
        assert device.pipeline_cache._saved_size > 0
    finally:
        device.release()


def _re(text: str) -> str:
    import re

    return re.escape(text)


# -- executables whose code uses what they declare (hand-built SPIR-V) --------------------------

from tests.hal_vulkan import typed_kernels  # noqa: E402


def _run_typed(device, data: bytes, src: np.ndarray, out_dtype, count: int) -> np.ndarray:
    from irtk.hal import BindingRef, Fence

    exe = create(device, data)
    bsrc = device.allocator.allocate_with_data(src.tobytes())
    bdst = device.allocator.allocate(count * np.dtype(out_dtype).itemsize)
    cb = device.create_command_buffer()
    cb.dispatch(exe, exe.lookup("main"), (count // typed_kernels.WORKGROUP, 1, 1), [],
                [BindingRef(bsrc, 0, -1), BindingRef(bdst, 0, -1)])
    cb.finalize()
    sem = device.create_semaphore(0)
    device.queue_execute(Fence(), Fence([(sem, 1)]), [cb])
    assert sem.wait(1, timeout=30)
    out = np.frombuffer(bdst.read(), dtype=out_dtype).copy()
    exe.release()
    return out


_MISSING = {"f16": ("float16", "shaderFloat16", "16-bit float support"),
            "f64": ("float64", "shaderFloat64", "64-bit float support"),
            "i8": ("int8", "shaderInt8", "8-bit integer support"),
            "i16": ("int16", "shaderInt16", "16-bit integer support"),
            "i64": ("int64", "shaderInt64", "64-bit integer support")}


@pytest.mark.parametrize("name", list(typed_kernels.TYPES))
def test_typed_code_runs_where_supported_and_is_refused_elsewhere(device, rng, name):
    data = typed_kernels.typed_executable(name)
    dtype = typed_kernels.TYPES[name][0]
    field, feature, words = _MISSING[name]
    storage = [k for k in typed_kernels.TYPES[name][4] if k.startswith("storage")]
    storage_ok = all(device.info.storage_buffer_8bit if "8" in k else
                     device.info.storage_buffer_16bit for k in storage)
    if not getattr(device.info, field):
        refused_without_objects(device, data, rf"executable needs {feature}; device "
                                              rf"'{_re(device.info.name)}' has no {words}")
        return
    if not storage_ok:
        refused_without_objects(device, data, "executable needs storageBuffer")
        return
    count = 4 * typed_kernels.WORKGROUP
    if np.dtype(dtype).kind == "f":
        src = rng.uniform(-100, 100, count).astype(dtype)
    else:
        info = np.iinfo(dtype)
        src = rng.integers(info.min, info.max, count, dtype=dtype, endpoint=True)
    out = _run_typed(device, data, src, dtype, count)
    np.testing.assert_array_equal(out, typed_kernels.typed_reference(name, src))


def test_subgroup_size_the_device_has_is_what_the_shader_sees(device):
    size = device.info.subgroup_size
    count = 2 * typed_kernels.WORKGROUP
    out = _run_typed(device, typed_kernels.subgroup_executable(size), np.zeros(count, np.uint32),
                     np.uint32, count)
    assert set(out.tolist()) == {size}


def test_a_subgroup_size_the_device_cannot_give_is_refused(device):
    lo = int(device.info.extra.get("minSubgroupSize", device.info.subgroup_size))
    hi = int(device.info.extra.get("maxSubgroupSize", device.info.subgroup_size))
    size = 2 * max(hi, device.info.subgroup_size)
    refused_without_objects(device, typed_kernels.subgroup_executable(size),
                            rf"compiled for subgroup size {size}.*device "
                            rf"'{_re(device.info.name)}' has subgroup size")
    if lo < hi and device.info.extra.get("subgroupSizeControl") == "true":
        count = typed_kernels.WORKGROUP
        out = _run_typed(device, typed_kernels.subgroup_executable(lo),
                         np.zeros(count, np.uint32), np.uint32, count)
        assert set(out.tolist()) == {lo}
