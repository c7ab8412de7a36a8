"""Read-only bindings as uniform texel buffers (the `llvmpipe` profile's loads): the executable
format's binding kind, the views a recording makes and owns, descriptor sets where there are no
push descriptors, and the limits a texel binding is checked against."""
from __future__ import annotations

import dataclasses

import flatbuffers
import numpy as np
import pytest

from irtk.compiler.codegen.spirv import compile_kernel, pack_executable
from irtk.compiler.kernel import AffineMap, Kernel, Op, Operand
from irtk.compiler.targets import VULKAN_PROFILES
from irtk.errors import DeviceError, VerificationError
from irtk.hal import Fence
from irtk.hal.command_buffer import BindingRef
from hal_vulkan.executable_def import parse_executable
from schemas import vulkan_executable as ve


def _map(n: int, dims: list[int]) -> AffineMap:
    return AffineMap(n, tuple(tuple(1 if j == d else 0 for j in range(n + 1)) for d in dims))


def scaled_sum(rows: int, cols: int) -> Kernel:
    """out[r] += sum_c x[r, c] * w[c]: two read-only inputs, one read-write output (the
    fallback strategy: a sum of products keeps its order)."""
    return Kernel("scaled_sum", (rows, cols),
                  [Operand(0, "f32", (rows, cols), _map(2, [0, 1])),
                   Operand(1, "f32", (cols,), _map(2, [1]))],
                  [Operand(2, "f32", (rows,), _map(2, [0]))],
                  [Op("arith.mulf", (0, 1), "f32"), Op("arith.addf", (2, 3), "f32")], [4],
                  ("parallel", "reduction"))


def row_sum(rows: int, cols: int) -> Kernel:
    """out[r] += sum_c x[r, c] (the reduction strategy: an input summed as loaded)."""
    return Kernel("row_sum", (rows, cols), [Operand(0, "f32", (rows, cols), _map(2, [0, 1]))],
                  [Operand(1, "f32", (rows,), _map(2, [0]))], [Op("arith.addf", (1, 0), "f32")],
                  [2], ("parallel", "reduction"))


def texel_profile():
    """`default` reading inputs through texel buffers (no subgroup size assumed, so the
    kernels run on every device)."""
    return dataclasses.replace(VULKAN_PROFILES["default"], texel_buffer_loads=True,
                               vulkan_env="vulkan1.1")


def run(device, kernel: Kernel, compiled, arrays: list[np.ndarray], out: np.ndarray,
        times: int = 1) -> list[np.ndarray]:
    """Dispatch `compiled` `times` times, each with freshly allocated inputs and output."""
    exe = device.create_executable("vulkan-spirv-fb", pack_executable([compiled],
                                                                      texel_profile()))
    cb = device.create_command_buffer(binding_capacity=len(compiled.bindings))
    cb.dispatch(exe, 0, compiled.workgroup_count, [],
                [BindingRef(None, 0, -1, slot=b) for b, _ in compiled.bindings])
    cb.finalize()
    results = []
    for _ in range(times):
        buffers = [device.allocator.allocate_with_data(a.tobytes()) for a in arrays + [out]]
        sem = device.create_semaphore(0)
        device.queue_execute(Fence(), Fence([(sem, 1)]), [cb],
                             [[(b, 0, -1) for b in buffers]])
        assert sem.wait(1, timeout=60)
        results.append(np.frombuffer(buffers[-1].read(), np.float32).copy())
        sem.release()
        for b in buffers:
            b.release()
    cb.release()
    exe.release()
    return results


@pytest.mark.parametrize("strategy", ["reduction", "fallback"])
def test_texel_inputs_give_the_storage_buffer_result(device, rng, strategy):
    """Inputs read through buffer views (rows of 1000: a length that is not whole texels)
    give what numpy gives, on push descriptors (lavapipe) and descriptor sets (SwiftShader),
    call after call with new buffers."""
    rows, cols = 37, 1000
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    w = rng.standard_normal(cols).astype(np.float32)
    out = rng.standard_normal(rows).astype(np.float32)
    if strategy == "reduction":
        kernel, inputs, terms = row_sum(rows, cols), [x], x.astype(np.float64)
    else:
        kernel, inputs, terms = scaled_sum(rows, cols), [x, w], x.astype(np.float64) * w
    compiled = compile_kernel(kernel, texel_profile(), strategy=strategy)
    assert compiled.texel_bindings == tuple(range(len(inputs)))
    assert [b for b, read_only in compiled.bindings if read_only] == list(range(len(inputs)))
    for got in run(device, kernel, compiled, inputs, out, times=3):
        np.testing.assert_allclose(got, out + terms.sum(axis=1), rtol=1e-4, atol=1e-3)


def test_elementwise_texel_inputs_of_two_element_types(device, rng):
    """The elementwise strategy's own texel buffers: an f32 and an i32 input (w broadcast
    along rows), one f32 output."""
    rows, cols = 37, 1000
    kernel = Kernel("axpw", (rows, cols),
                    [Operand(0, "f32", (rows, cols), _map(2, [0, 1])),
                     Operand(1, "i32", (cols,), _map(2, [1]))],
                    [Operand(2, "f32", (rows, cols), _map(2, [0, 1]))],
                    [Op("arith.sitofp", (1,), "f32"), Op("arith.mulf", (0, 3), "f32"),
                     Op("arith.addf", (4, 0), "f32")], [5], ("parallel", "parallel"))
    compiled = compile_kernel(kernel, texel_profile())
    assert compiled.strategy == "elementwise" and compiled.texel_bindings == (0, 1)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    w = rng.integers(-1000, 1000, cols).astype(np.int32)
    out = rng.standard_normal((rows, cols)).astype(np.float32)
    for got in run(device, kernel, compiled, [x, w], out, times=2):
        np.testing.assert_array_equal(got.reshape(rows, cols), x * w.astype(np.float32) + x)


def test_a_texel_binding_beyond_max_texel_buffer_elements_is_refused(device, rng):
    """A binding of more 16-byte texels than maxTexelBufferElements is an error naming the
    limit (SwiftShader allows 65536 texels, 1 MiB); a storage binding of that size is fine."""
    limit = int(device.physical.limits["maxTexelBufferElements"])
    if limit * 16 > 64 << 20:
        pytest.skip(f"maxTexelBufferElements is {limit}: too large a buffer to test here")
    cols = 64
    rows = limit * 4 // cols + 1           # one texel more than the limit
    kernel = scaled_sum(rows, cols)
    compiled = compile_kernel(kernel, texel_profile(), strategy="fallback")
    x = np.ones((rows, cols), np.float32)
    with pytest.raises(DeviceError, match=r"maxTexelBufferElements \(" + str(limit)):
        run(device, kernel, compiled, [x, np.ones(cols, np.float32)],
            np.zeros(rows, np.float32))
    # A direct binding is checked when the dispatch is recorded.
    exe = device.create_executable("vulkan-spirv-fb", pack_executable([compiled],
                                                                      texel_profile()))
    buffers = [device.allocator.allocate(a.nbytes) for a in (x, np.ones(cols, np.float32),
                                                             np.zeros(rows, np.float32))]
    cb = device.create_command_buffer()
    with pytest.raises(DeviceError, match=r"binding 0: .*maxTexelBufferElements"):
        cb.dispatch(exe, 0, compiled.workgroup_count, [],
                    [BindingRef(b, 0, b.size) for b in buffers])
    cb.release()
    exe.release()
    for b in buffers:
        b.release()
    plain = compile_kernel(kernel, VULKAN_PROFILES["default"], strategy="fallback")
    assert plain.texel_bindings == ()


def test_a_texel_binding_off_its_alignment_is_refused(device):
    """A texel binding's offset must be a multiple of minTexelBufferOffsetAlignment; the error
    names that limit, not the storage-buffer one."""
    rows, cols = 8, 64
    compiled = compile_kernel(scaled_sum(rows, cols), texel_profile(), strategy="fallback")
    exe = device.create_executable("vulkan-spirv-fb", pack_executable([compiled],
                                                                      texel_profile()))
    sizes = (4 * rows * cols + 16, 4 * cols, 4 * rows)
    buffers = [device.allocator.allocate(n) for n in sizes]
    refs = [BindingRef(buffers[0], 4, 4 * rows * cols)] + \
        [BindingRef(b, 0, b.size) for b in buffers[1:]]
    cb = device.create_command_buffer()
    with pytest.raises(DeviceError, match=r"binding 0: offset 4 is not a multiple of "
                                          r"minTexelBufferOffsetAlignment"):
        cb.dispatch(exe, 0, compiled.workgroup_count, [], refs)
    cb.release()
    exe.release()
    for b in buffers:
        b.release()


def _with_binding(data: bytes, **fields) -> bytes:
    root = ve.ExecutableDefT.InitFromPackedBuf(data, 0)
    for name, value in fields.items():
        setattr(root.entryPoints[0].bindings[0], name, value)
    builder = flatbuffers.Builder(0)
    builder.Finish(root.Pack(builder), file_identifier=b"IRVK")
    return bytes(builder.Output())


def test_binding_kinds_in_the_executable_format():
    kernel = scaled_sum(8, 64)
    data = pack_executable([compile_kernel(kernel, texel_profile())],
                           texel_profile())
    spec = parse_executable(data)
    assert [(b.binding, b.read_only, b.texel) for b in spec.entry_points[0].bindings] == \
        [(0, True, True), (1, True, True), (2, False, False)]
    with pytest.raises(VerificationError, match=r"bindings\[0\]\.kind: unknown binding kind 7"):
        parse_executable(_with_binding(data, kind=7))
    with pytest.raises(VerificationError, match=r"bindings\[0\]: a texel buffer binding must "
                                                r"be read-only"):
        parse_executable(_with_binding(data, readOnly=False))
