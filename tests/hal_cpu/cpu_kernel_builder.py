"""Builds "cpu-kernel-fb" executables for the tests with the generated FlatBuffers object API,
and runs one dispatch of them on a device (element storage through `irtk.hal.numerics`)."""
from __future__ import annotations

from collections.abc import Sequence

import flatbuffers
import numpy as np

from irtk import types
from irtk.hal import BindingRef, Device, Fence, numerics
from irtk.types import storage_bytes
from schemas import cpu_executable as fb

DTYPES = {"f32": np.float32, "i32": np.int32, "i1": np.uint8}
Rows = Sequence[Sequence[int]]
NO_MAP: Rows = ()   # pass as `rows` for a gather input


def identity_rows(rank: int) -> list[list[int]]:
    """The identity map over `rank` loops: index_r = loop_r."""
    return [[1 if j == r else 0 for j in range(rank + 1)] for r in range(rank)]


def operand(binding: int, element_type: str, shape: Sequence[int], num_dims: int,
            rows: Rows | None = None, num_symbols: int = 0,
            dynamic_dims: Sequence[int] | None = None) -> fb.OperandDefT:
    """`rows is NO_MAP`: a gather input; rows have num_dims + num_symbols + 1 columns."""
    dyn = list(dynamic_dims) if dynamic_dims is not None else None
    if rows is NO_MAP:
        return fb.OperandDefT(binding=binding, elementType=element_type, shape=list(shape),
                              dynamicDims=dyn)
    rows = identity_rows(len(shape)) if rows is None else rows
    assert all(len(row) == num_dims + num_symbols + 1 for row in rows)
    amap = fb.AffineMapDefT(numDims=num_dims, coefficients=[c for row in rows for c in row],
                            numSymbols=num_symbols)
    return fb.OperandDefT(binding=binding, elementType=element_type, shape=list(shape), map=amap,
                          dynamicDims=dyn)


def op(name: str, *operands: int, result_type: str | None = None, predicate: str | None = None,
       int_value: int = 0, float_value: float = 0.0) -> fb.OpDefT:
    return fb.OpDefT(name=name, operands=list(operands), resultType=result_type,
                     predicate=predicate, intValue=int_value, floatValue=float_value)


def kernel(name: str, loop_ranges: Sequence[int], inputs: list[fb.OperandDefT],
           outputs: list[fb.OperandDefT], ops: list[fb.OpDefT], yields: Sequence[int],
           tile_size: int = 64, iterators: str = "", params: Sequence[tuple[str, str]] = (),
           dynamic_loops: Sequence[int] | None = None,
           grid: fb.GridDefT | None = None) -> fb.KernelDefT:
    """`iterators`: one letter per loop, "p" parallel or "r" reduction (empty: all parallel);
    `params`: (name, type) push constants, laid out in order, each aligned to its size."""
    param_defs, offset = [], 0
    for pname, ptype in params:
        size = 8 if ptype in ("i64", "f64") else 4
        offset = -(-offset // size) * size
        param_defs.append(fb.ParamDefT(name=pname, type=ptype, offset=offset))
        offset += size
    return fb.KernelDefT(name=name, loopRanges=list(loop_ranges), inputs=inputs,
                         outputs=outputs, ops=ops, yields=list(yields), tileSize=tile_size,
                         iteratorTypes=[0 if c == "p" else 1 for c in iterators],
                         params=param_defs,
                         dynamicLoopRanges=list(dynamic_loops) if dynamic_loops else None,
                         grid=grid)


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
        constants: Sequence[int] = (), input_types: Sequence[str] | None = None,
        ) -> list[np.ndarray]:
    """Dispatch export `ordinal` once: inputs bound first, then outputs; returns the outputs.

    With `input_types`, inputs are values of those element types (stored through numerics);
    without, their numpy bytes are bound as they are. Outputs of f32, i32 and i1 come back as
    those numpy dtypes (i1 as uint8 bytes), other types as numerics' compute-dtype values."""
    exe = device.create_executable("cpu-kernel-fb", data)
    alloc = device.allocator
    if input_types is None:
        in_bytes = [np.ascontiguousarray(a).tobytes() for a in inputs]
    else:
        in_bytes = [numerics.encode(t, a) for a, t in zip(inputs, input_types)]
    in_bufs = [alloc.allocate_with_data(b if b else b"\0") for b in in_bytes]
    out_bufs = []
    for k, (shape, etype) in enumerate(outputs):
        count = int(np.prod(shape, dtype=np.int64))
        buf = alloc.allocate(max(1, storage_bytes(etype, count)))
        if initial_outputs is not None:
            init = initial_outputs[k]
            buf.write(np.ascontiguousarray(init, dtype=DTYPES[etype]).tobytes()
                      if etype in DTYPES else numerics.encode(etype, init))
        out_bufs.append(buf)
    cb = device.create_command_buffer()
    cb.dispatch(exe, ordinal, workgroups, list(constants),
                [BindingRef(b, 0, b.size) for b in in_bufs + out_bufs])
    cb.finalize()
    sem = device.create_semaphore(0)
    device.queue_execute(Fence(), Fence([(sem, 1)]), [cb])
    assert sem.wait(1, timeout=60)
    results = []
    for b, (shape, t) in zip(out_bufs, outputs):
        count = int(np.prod(shape, dtype=np.int64))
        if t in DTYPES:
            results.append(np.frombuffer(b.read(), dtype=DTYPES[t])[:count].reshape(shape))
        else:
            results.append(numerics.decode(t, b.read(), count).reshape(shape))
    return results


def words(*values: tuple[str, int | float]) -> list[int]:
    """Push-constant words for (type, value) params, laid out as kernels expect."""
    out = bytearray()
    for t, v in values:
        dtype = types.scalar_type(t).storage_dtype
        out += bytes(-len(out) % dtype.itemsize)
        out += np.array([v], dtype=dtype).tobytes()
    out += bytes(-len(out) % 4)
    return [int(w) for w in np.frombuffer(bytes(out), dtype="<u4")]
