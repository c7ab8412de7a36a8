"""Texel windows (profiles with `texel_window`, SwiftShader's): a reduction input read through
an array of texel-buffer views that overlap by half, one picked per parallel point. The codegen
rule, results on every device that can run it (and a refusal naming the feature where it
cannot), the view ranges a recording makes, and the executable format's checks."""
from __future__ import annotations

import dataclasses

import flatbuffers
import numpy as np
import pytest

from irtk.compiler.codegen.spirv import compile_kernel, pack_executable
from irtk.compiler.codegen.spirv.reduction import texel_windows
from irtk.compiler.kernel import AffineMap, Kernel, Op, Operand
from irtk.compiler.targets import VULKAN_PROFILES
from irtk.errors import DeviceError, VerificationError
from irtk.hal import DeviceInfo, Fence
from irtk.hal.binding import ResolvedBinding
from irtk.hal.command_buffer import BindingRef
from hal_vulkan import requirements
from hal_vulkan.descriptors import window_ranges
from hal_vulkan.executable_def import parse_executable
from schemas import vulkan_executable as ve

WINDOW = 1024   # texels per view in these tests: small, so small data crosses many windows


def _map(n: int, rows: list[list[int]]) -> AffineMap:
    return AffineMap(n, tuple(tuple(r) for r in rows))


def row_sum(rows: int, cols: int) -> Kernel:
    """out[r] += sum_c x[r, c] (the reduction strategy)."""
    return Kernel("row_sum", (rows, cols),
                  [Operand(0, "f32", (rows, cols), _map(2, [[1, 0, 0], [0, 1, 0]]))],
                  [Operand(1, "f32", (rows,), _map(2, [[1, 0, 0]]))],
                  [Op("arith.addf", (1, 0), "f32")], [2], ("parallel", "reduction"))


def column_sum(rows: int, cols: int) -> Kernel:
    """out[c] += sum_r x[r, c]: a point's reads span the whole matrix."""
    return Kernel("column_sum", (cols, rows),
                  [Operand(0, "f32", (rows, cols), _map(2, [[0, 1, 0], [1, 0, 0]]))],
                  [Operand(1, "f32", (cols,), _map(2, [[1, 0, 0]]))],
                  [Op("arith.addf", (1, 0), "f32")], [2], ("parallel", "reduction"))


def plane_sum(rows: int, a: int, b: int) -> Kernel:
    """out[r] += sum_{i, j} x[r, i, j]: two reduction loops."""
    return Kernel("plane_sum", (rows, a, b),
                  [Operand(0, "f32", (rows, a, b),
                           _map(3, [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]))],
                  [Operand(1, "f32", (rows,), _map(3, [[1, 0, 0, 0]]))],
                  [Op("arith.addf", (1, 0), "f32")], [2],
                  ("parallel", "reduction", "reduction"))


def windowed(window: int = WINDOW):
    """`default` with texel windows (no subgroup size assumed: runs on every device)."""
    return dataclasses.replace(VULKAN_PROFILES["default"], texel_window=window)


def test_the_swiftshader_row_sum_reads_through_windows():
    """1024 x 1024 f32 (4 MiB, 4x SwiftShader's 65536-texel views): 8 views of 1 MiB, one
    every 512 KiB, and the executable asks for dynamic indexing of texel-buffer arrays."""
    profile = VULKAN_PROFILES["swiftshader"]
    compiled = compile_kernel(row_sum(1024, 1024), profile)
    assert compiled.strategy == "reduction"
    assert compiled.texel_windows == {0: 8} and compiled.texel_window == 65536
    assert compiled.texel_bindings == (0,) and compiled.requirements["texel_array_indexing"]
    spec = parse_executable(pack_executable([compiled], profile))
    assert [(b.texel, b.window_count, b.window_texels) for b in spec.entry_points[0].bindings] \
        == [(True, 8, 65536), (False, 0, 0)]
    assert spec.requirements.texel_array_indexing
    # lavapipe's profile has no windows (one view reaches 2 GiB there).
    assert compile_kernel(row_sum(1024, 1024), VULKAN_PROFILES["llvmpipe"]).texel_windows == {}


def test_which_inputs_get_windows():
    """Only inputs whose reads for one point span at most half a window, wherever in a texel
    the point's first word falls: a row of 2045 words from the last word of a texel spans 512
    texels, half a window of 1024; one word more does not fit. A column sum reads the whole
    matrix for every point; dynamic shapes and profiles without windows get none."""
    assert texel_windows(row_sum(64, 2045), windowed()) == {0: -(-64 * 2045 * 4 // 8192)}
    assert texel_windows(row_sum(64, 2046), windowed()) == {}
    assert texel_windows(column_sum(64, 64), windowed()) == {}
    assert texel_windows(row_sum(64, 64), VULKAN_PROFILES["default"]) == {}
    dynamic = dataclasses.replace(row_sum(64, 64), loop_ranges=(64, "?"))
    assert texel_windows(dynamic, windowed()) == {}
    compiled = compile_kernel(column_sum(300, 100), windowed())
    assert compiled.texel_windows == {} and compiled.texel_bindings == ()
    assert "texel_array_indexing" not in compiled.requirements


def _dispatch(device, compiled, profile, arrays: list[np.ndarray], out: np.ndarray,
              offset: int) -> np.ndarray:
    """One dispatch with each binding at `offset` bytes into a larger buffer."""
    exe = device.create_executable("vulkan-spirv-fb", pack_executable([compiled], profile))
    data = [a.tobytes() for a in arrays + [out]]
    buffers = [device.allocator.allocate_with_data(bytes(offset) + d + bytes(64)) for d in data]
    cb = device.create_command_buffer()
    cb.dispatch(exe, 0, compiled.workgroup_count, [],
                [BindingRef(b, offset, len(d)) for b, d in zip(buffers, data)])
    cb.finalize()
    sem = device.create_semaphore(0)
    try:
        device.queue_execute(Fence(), Fence([(sem, 1)]), [cb])
        assert sem.wait(1, timeout=60)
        return np.frombuffer(buffers[-1].read(offset, out.nbytes), out.dtype).copy()
    finally:
        sem.release()
        cb.release()
        exe.release()
        for b in buffers:
            b.release()


@pytest.mark.parametrize("shape,offset", [((37, 1000), 0), ((61, 2044), 512), ((23, 1001), 256),
                                          ((19, 12, 75), 0), ((5, 3), 0)])
def test_windowed_row_sums_match_numpy(device, rng, shape, offset):
    """Rows that straddle window boundaries (1000 words: 250 texels; 2044 words: half a window
    exactly; 1001 words: rows that start mid-texel, read a word at a time), bindings at an
    offset, two reduction loops, and rows too short for the reduction strategy (the fallback
    has no windows). Where the device cannot index texel-buffer arrays the executable is
    refused, naming the feature."""
    profile = windowed()
    rows = shape[0]
    kernel = row_sum(*shape) if len(shape) == 2 else plane_sum(*shape)
    compiled = compile_kernel(kernel, profile)
    assert bool(compiled.texel_windows) == (compiled.strategy == "reduction") == (shape != (5, 3))
    x = rng.standard_normal(shape).astype(np.float32)
    out = rng.standard_normal(rows).astype(np.float32)
    if compiled.texel_windows and not device.info.texel_array_indexing:
        with pytest.raises(DeviceError, match="needs shaderUniformTexelBufferArrayDynamic"
                                              "Indexing; device .* has no dynamic indexing"):
            device.create_executable("vulkan-spirv-fb", pack_executable([compiled], profile))
        return
    got = _dispatch(device, compiled, profile, [x], out, offset)
    expected = out + x.astype(np.float64).reshape(rows, -1).sum(axis=1)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


class _Buffer:
    """What `window_ranges` reads of a HAL buffer: where its bytes start on the device."""

    def __init__(self, start: int) -> None:
        self.start = start

    def device_offset(self, offset: int) -> int:
        return self.start + offset


class _Context:
    """What `window_ranges` reads of a device context: two limits and the name."""

    def __init__(self, max_texels: int = 65536, align: int = 16) -> None:
        self.physical = type("P", (), {"limits": {"maxTexelBufferElements": max_texels,
                                                  "minTexelBufferOffsetAlignment": align}})
        self.info = type("I", (), {"name": "test device"})


def test_window_views_cover_the_binding():
    """View k starts k half-windows in and stops at the binding's end (rounded up to a whole
    texel); views past the end, which only out-of-bounds reads reach, view the start."""
    ref = ResolvedBinding(_Buffer(4096), 256, 5000)    # 312.5 texels
    ranges = window_ranges(_Context(), ref, 4, 256, "binding 0")
    assert ranges == [(4352, 4096), (4352 + 2048, 5008 - 2048), (4352 + 4096, 5008 - 4096),
                      (4352, 4096)]
    empty = window_ranges(_Context(), ResolvedBinding(_Buffer(4096), 0, 0), 2, 256, "b")
    assert empty == [(4096, 16), (4096, 16)]
    with pytest.raises(DeviceError, match=r"windows of 256 texels are more than "
                                          r"maxTexelBufferElements \(128\)"):
        window_ranges(_Context(max_texels=128), ref, 4, 256, "binding 0")
    with pytest.raises(DeviceError, match=r"start every 32 bytes, not a multiple of "
                                          r"minTexelBufferOffsetAlignment \(256\)"):
        window_ranges(_Context(align=256), ResolvedBinding(_Buffer(0), 0, 64), 2, 4, "b")


def _executable(**binding_fields) -> bytes:
    data = pack_executable([compile_kernel(row_sum(64, 512), windowed())], windowed())
    root = ve.ExecutableDefT.InitFromPackedBuf(data, 0)
    for name, value in binding_fields.items():
        if name == "texelArrayIndexing":
            root.requirements.texelArrayIndexing = value
        else:
            setattr(root.entryPoints[0].bindings[0], name, value)
    builder = flatbuffers.Builder(0)
    builder.Finish(root.Pack(builder), file_identifier=b"IRVK")
    return bytes(builder.Output())


@pytest.mark.parametrize("fields,message", [
    (dict(kind=ve.BindingKind.StorageBuffer), r"bindings\[0\]: only a texel buffer binding can "
                                              r"have texel windows"),
    (dict(windowTexels=1000), r"power-of-two size of at least 2 texels, found 16 window\(s\) "
                              r"of 1000"),
    (dict(windowCount=0), r"found 0 window\(s\) of 1024"),
    (dict(windowCount=100000), r"100000 texel windows is more than any device allows"),
    (dict(texelArrayIndexing=False), r"requirements.texel_array_indexing: is not set, but a "
                                     r"binding is read through texel windows"),
])
def test_malformed_windows_are_refused(fields, message):
    assert parse_executable(_executable()).entry_points[0].bindings[0].window_count == 16
    with pytest.raises(VerificationError, match=message):
        parse_executable(_executable(**fields))


def test_devices_are_checked_for_windows():
    """The feature, the window size against maxTexelBufferElements and the views against
    maxPerStageDescriptorSampledImages, all before any Vulkan object exists."""
    spec = parse_executable(_executable())
    info = DeviceInfo(driver="vulkan", name="Tiny GPU", api_version="1.2.0", subgroup_size=4,
                      max_workgroup_invocations=256, shared_memory_bytes=32768,
                      texel_array_indexing=True,
                      extra={"maxPushConstantsSize": "128",
                             "maxTexelBufferElements": "65536",
                             "maxPerStageDescriptorSampledImages": "200"})
    assert requirements.problems(spec, info) == []
    poor = dataclasses.replace(info, texel_array_indexing=False, extra={
        "maxPushConstantsSize": "128",
        "maxTexelBufferElements": "512", "maxPerStageDescriptorSampledImages": "8"})
    found = requirements.problems(spec, poor)
    assert "executable needs shaderUniformTexelBufferArrayDynamicIndexing; device 'Tiny GPU' " \
           "has no dynamic indexing of texel buffer arrays" in found
    assert "entry point 'row_sum' reads through 16 texel buffer views; device 'Tiny GPU' " \
           "allows 8 (maxPerStageDescriptorSampledImages)" in found
    assert "entry point 'row_sum' reads through texel windows of 1024 texels; device " \
           "'Tiny GPU' allows 512 (maxTexelBufferElements)" in found


def matmul(m: int, n: int, k: int) -> Kernel:
    """C[m, n] += A[m, k] * B[k, n] (the matmul strategy)."""
    return Kernel("matmul", (m, n, k),
                  [Operand(0, "f32", (m, k), _map(3, [[1, 0, 0, 0], [0, 0, 1, 0]])),
                   Operand(1, "f32", (k, n), _map(3, [[0, 0, 1, 0], [0, 1, 0, 0]]))],
                  [Operand(2, "f32", (m, n), _map(3, [[1, 0, 0, 0], [0, 1, 0, 0]]))],
                  [Op("arith.mulf", (0, 1), "f32"), Op("arith.addf", (2, 3), "f32")], [4],
                  ("parallel", "parallel", "reduction"))


def test_swiftshader_matmul_inputs_of_one_window_are_texel_views():
    """On the swiftshader profile A and B are single texel views where each fits one window
    (512 x 512 f32 is 1 MiB, exactly 65536 texels), read with the wide loads texel fetches
    allow; a 2 MiB A is read through windows instead (4 views: test_matmul_windows.py has the
    rule), B still one view."""
    profile = VULKAN_PROFILES["swiftshader"]
    square = compile_kernel(matmul(512, 512, 512), profile)
    assert square.strategy == "matmul" and square.texel_bindings == (0, 1)
    assert square.texel_windows == {} and "texel_array_indexing" not in square.requirements
    tall = compile_kernel(matmul(1024, 512, 512), profile)
    assert tall.texel_bindings == (0, 1) and tall.texel_windows == {0: 4}
    from irtk.compiler.codegen.spirv.matmul import matmul_tiling
    t = matmul_tiling(matmul(1024, 512, 512), profile)
    assert t.texel_views == {1} and t.texel_windows == ((0, 4),) and t.b_chunk == 0
    assert t.b_wide and t.a_wide
    assert matmul_tiling(matmul(512, 512, 512), VULKAN_PROFILES["default"]).texel_views == set()


@pytest.mark.parametrize("m,n,k", [(96, 80, 72), (130, 33, 65)])
def test_matmul_through_texel_views_matches_numpy(device, rng, m, n, k):
    """Texel views in the matmul strategy on every device (the `default` profile with windows:
    its tiling, A and B as views), against numpy in float64, bindings at an offset."""
    profile = windowed(65536)
    compiled = compile_kernel(matmul(m, n, k), profile)
    assert compiled.strategy == "matmul" and compiled.texel_bindings == (0, 1)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    got = _dispatch(device, compiled, profile, [a, b], c, 256)
    np.testing.assert_allclose(got.reshape(m, n), c + a.astype(np.float64) @ b, rtol=1e-4,
                               atol=1e-4)


def test_swiftshader_elementwise_mixes_texel_views_and_windows(device, rng):
    """On the swiftshader profile an elementwise input of at most one window is a texel view
    and a larger one that quads read 4 elements at a time is read through texel windows: x
    (1088 x 256 f32, 1.06 MiB: 3 views) through windows, w broadcast along rows from a view;
    the numpy result."""
    rows, cols = 1088, 256
    kernel = Kernel("axpw", (rows, cols),
                    [Operand(0, "f32", (rows, cols), _map(2, [[1, 0, 0], [0, 1, 0]])),
                     Operand(1, "f32", (cols,), _map(2, [[0, 1, 0]]))],
                    [Operand(2, "f32", (rows, cols), _map(2, [[1, 0, 0], [0, 1, 0]]))],
                    [Op("arith.mulf", (0, 1), "f32"), Op("arith.addf", (3, 0), "f32")], [4],
                    ("parallel", "parallel"))
    profile = VULKAN_PROFILES["swiftshader"]
    compiled = compile_kernel(kernel, profile)
    assert compiled.strategy == "elementwise" and compiled.texel_bindings == (0, 1)
    assert compiled.texel_windows == {0: 3}
    if compiled.requirements.get("subgroup_size", device.info.subgroup_size) != \
            device.info.subgroup_size:
        pytest.skip("compiled for SwiftShader's subgroup size")
    if not device.info.texel_array_indexing:
        with pytest.raises(DeviceError, match="needs shaderUniformTexelBufferArrayDynamic"):
            device.create_executable("vulkan-spirv-fb", pack_executable([compiled], profile))
        return
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    w = rng.standard_normal(cols).astype(np.float32)
    got = _dispatch(device, compiled, profile, [x, w], np.zeros((rows, cols), np.float32), 0)
    np.testing.assert_array_equal(got.reshape(rows, cols), x * w + x)


def test_a_windowed_read_before_a_window_is_picked_is_an_internal_error():
    """A strategy must call `select_window` before reading a windowed binding; codegen that
    does not is caught with a CompileError naming the kernel and binding, not bad SPIR-V."""
    from irtk.compiler.codegen.spirv.interface import ShaderInterface
    from irtk.errors import CompileError

    iface = ShaderInterface(row_sum(64, 64), windowed(), (64, 1, 1), {0: 2})
    iface.e.label()
    with pytest.raises(CompileError, match="internal error: kernel 'row_sum' reads binding 0 "
                                           "before selecting a texel window"):
        iface.load_words(0, iface.e.u32c(0), 4)
