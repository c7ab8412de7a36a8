"""Builds "cpu-kernel-fb" executables for the tests with the generated FlatBuffers object API,
and runs one dispatch of them on a device."""
from __future__ import annotations

from collections.abc import Sequence

import flatbuffers
import numpy as np

from irtk.hal import BindingRef, Device, Fence
from schemas import cpu_executable as fb

DTYPES = {"f32": np.float32, "i32": np.int32, "i1": np.uint8}
Rows = Sequence[Sequence[int]]


def identity_rows(rank: int) -> list[list[int]]:
    """The identity map over `rank` loops: index_r = loop_r."""
    return [[1 if j == r else 0 for j in range(rank + 1)] for r in range(rank)]


def operand(binding: int, element_type: str, shape: Sequence[int], num_dims: int,
            rows: Rows | None = None) -> fb.OperandDefT:
    rows = identity_rows(len(shape)) if rows is None else rows
    assert all(len(row) == num_dims + 1 for row in rows)
    amap = fb.AffineMapDefT(numDims=num_dims, coefficients=[c for row in rows for c in row])
    return fb.OperandDefT(binding=binding, elementType=element_type, shape=list(shape), map=amap)


def op(name: str, *operands: int, result_type: str | None = None, predicate: str | None = None,
       int_value: int = 0, float_value: float = 0.0) -> fb.OpDefT:
    return fb.OpDefT(name=name, operands=list(operands), resultType=result_type,
                     predicate=predicate, intValue=int_value, floatValue=float_value)


def kernel(name: str, loop_ranges: Sequence[int], inputs: list[fb.OperandDefT],
           outputs: list[fb.OperandDefT], ops: list[fb.OpDefT], yields: Sequence[int],
           tile_size: int = 64) -> fb.KernelDefT:
    return fb.KernelDefT(name=name, loopRanges=list(loop_ranges), inputs=inputs,
                         outputs=outputs, ops=ops, yields=list(yields), tileSize=tile_size)


def executable(*kernels: fb.KernelDefT, identifier: bytes = b"IRCP") -> bytes:
    builder = flatbuffers.Builder(1024)
    root = fb.ExecutableDefT(kernels=list(kernels)).Pack(builder)
    builder.Finish(root, file_identifier=identifier)
    return bytes(builder.Output())


def elementwise(name: str, shape: Sequence[int], in_types: Sequence[str], out_types: Sequence[str],
                ops: list[fb.OpDefT], yields: Sequence[int], tile_size: int = 64) -> bytes:
    """A kernel over `shape` whose operands all use the identity map; bindings in order."""
    nd = len(shape)
    ins = [operand(i, t, shape, nd) for i, t in enumerate(in_types)]
    outs = [operand(len(ins) + k, t, shape, nd) for k, t in enumerate(out_types)]
    return executable(kernel(name, shape, ins, outs, ops, yields, tile_size))


def unary(name: str, op_name: str, in_type: str, out_type: str, n: int, tile_size: int = 64,
          **attrs) -> bytes:
    return elementwise(name, [n], [in_type], [out_type],
                       [op(op_name, 0, result_type=out_type, **attrs)], [2], tile_size)


def binary(name: str, op_name: str, in_type: str, out_type: str, n: int, tile_size: int = 64,
           **attrs) -> bytes:
    return elementwise(name, [n], [in_type, in_type], [out_type],
                       [op(op_name, 0, 1, result_type=out_type, **attrs)], [3], tile_size)


def workgroups_for(total: int, tile_size: int) -> tuple[int, int, int]:
    return (-(-total // tile_size), 1, 1)


def run(device: Device, data: bytes, inputs: Sequence[np.ndarray],
        outputs: Sequence[tuple[Sequence[int], str]], workgroups: tuple[int, int, int],
        ordinal: int = 0, initial_outputs: Sequence[np.ndarray] | None = None,
        ) -> list[np.ndarray]:
    """Dispatch export `ordinal` once: inputs bound first, then outputs; returns the outputs."""
    exe = device.create_executable("cpu-kernel-fb", data)
    alloc = device.allocator
    in_bufs = [alloc.allocate_with_data(np.ascontiguousarray(a).tobytes()) for a in inputs]
    out_bufs = []
    for k, (shape, etype) in enumerate(outputs):
        size = int(np.prod(shape, dtype=np.int64)) * np.dtype(DTYPES[etype]).itemsize
        buf = alloc.allocate(size)
        if initial_outputs is not None:
            buf.write(np.ascontiguousarray(initial_outputs[k], dtype=DTYPES[etype]).tobytes())
        out_bufs.append(buf)
    cb = device.create_command_buffer()
    cb.dispatch(exe, ordinal, workgroups, [],
                [BindingRef(b, 0, b.size) for b in in_bufs + out_bufs])
    cb.finalize()
    sem = device.create_semaphore(0)
    device.queue_execute(Fence(), Fence([(sem, 1)]), [cb])
    assert sem.wait(1, timeout=30)
    return [np.frombuffer(b.read(), dtype=DTYPES[t]).reshape(shape)
            for b, (shape, t) in zip(out_bufs, outputs)]
