"""The Python-facing ABI of exports: tensor types from reflection, and numpy <-> VM values.

An export's reflection carries "abi.args" and "abi.results", ';'-separated tensor types such as
"4x2xf32;4xi32" ("?" for a dynamic dimension). Ref-bank arguments are passed as buffer views
(allocated on the device and filled from the array); i32/i64/f32/f64 arguments as scalars.
Element types numpy lacks (bf16, f8/f4, i4, i2) travel as `TypedArray`s: an argument of such a
type may also be any array of real numbers, rounded (floats) or wrapped (integers) to the type.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from irtk import hal, tracing
from irtk.errors import InputError
from irtk.runtime.device_array import DeviceArray
from irtk.runtime.typed_array import TypedArray, integer_range_error
from irtk.vm.limits import format_bytes, host_memory_bytes


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int | None, ...]   # None: dynamic ("?")
    element_type: hal.ElementType

    @classmethod
    def parse(cls, text: str) -> "TensorType":
        """Parse "4x2xf32" / "?x4xi32" / "f32"; ValueError when malformed."""
        *dims, name = text.strip().split("x")
        element_type = hal.ElementType.from_name(name)
        shape: list[int | None] = []
        for d in dims:
            if d == "?":
                shape.append(None)
            elif d.isdigit():
                shape.append(int(d))
            else:
                raise ValueError(f"bad dimension '{d}' in tensor type '{text}'")
        return cls(tuple(shape), element_type)

    def __str__(self) -> str:
        return "x".join(["?" if d is None else str(d) for d in self.shape]
                        + [self.element_type.name])

    def matches(self, shape: tuple[int, ...], element_type: hal.ElementType) -> bool:
        return (element_type == self.element_type and len(shape) == len(self.shape)
                and all(e is None or e == d for e, d in zip(self.shape, shape)))


def parse_types(text: str) -> list[TensorType]:
    """The ';'-separated types of an "abi.args"/"abi.results" value ("" means none)."""
    return [TensorType.parse(t) for t in text.split(";")] if text.strip() else []


def describe_array(array: np.ndarray) -> str:
    """How a got-value reads in messages: "3x2xf32 (float32)"."""
    try:
        name = hal.ElementType.from_numpy(array.dtype).name
    except ValueError:
        name = str(array.dtype)
    return "x".join([str(d) for d in array.shape] + [name]) + f" ({array.dtype})"


def check_input_size(where: str, what: str, count: int, nbytes: int) -> None:
    """Refuse, before anything is allocated, an input larger than this machine's memory (or
    than numpy can index): `what` ("1000x1000xf32") has `count` elements of `nbytes` total."""
    limit = host_memory_bytes()
    if nbytes > limit or count >= 1 << 63:
        raise InputError(f"{where}: {what} is {count:,} elements ({format_bytes(nbytes)}), "
                         f"more than this machine's memory ({format_bytes(limit)})")


def to_typed_array(value: Any, expected: TensorType, where: str) -> TypedArray:
    """`value` as values of `expected`'s element type, which numpy lacks: a TypedArray of that
    type as it is; real numbers rounded (floats) or wrapped (integers) to it. Integers must lie
    in the type's signed or unsigned range (i4: -8..15), as MLIR's literals do."""
    et = expected.element_type
    if isinstance(value, TypedArray):
        if value.element_type != et or not expected.matches(value.shape, et):
            raise InputError(f"{where}: expected {expected}, got {value.type_text()}")
        return value
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as e:
        raise InputError(f"{where}: cannot convert {type(value).__name__} to an array: "
                         f"{e}") from None
    kinds = "fiub" if et.is_float else "iub"
    if array.dtype.kind not in kinds or not expected.matches(array.shape, et):
        raise InputError(f"{where}: expected {expected}, got {describe_array(array)}")
    check_input_size(where, describe_array(array), array.size,
                     max(array.size * array.itemsize, et.storage_bytes(array.size)))
    problem = integer_range_error(array, et)
    if problem is not None:
        raise InputError(f"{where}: {problem}")
    return TypedArray.from_values(array, et)


def to_array(value: Any, expected: TensorType | None, where: str) -> np.ndarray:
    """`value` as a contiguous array of the expected type; InputError naming `where` if not."""
    if isinstance(value, TypedArray):
        raise InputError(f"{where}: expected {expected or 'an array'}, "
                         f"got {value.type_text()}")
    if isinstance(value, np.ndarray):
        array = value
    else:
        try:
            array = np.asarray(value)
        except (ValueError, TypeError) as e:
            raise InputError(f"{where}: cannot convert {type(value).__name__} to an array: "
                             f"{e}") from None
        if expected is not None and array.dtype != expected.element_type.numpy_dtype():
            target = expected.element_type.numpy_dtype()
            if array.dtype == object or not np.can_cast(array.dtype, target, "same_kind"):
                raise InputError(f"{where}: expected {expected}, got {describe_array(array)}")
            check_input_size(where, describe_array(array), array.size,
                             array.size * target.itemsize)
            array = array.astype(target)
    if expected is not None:
        try:
            element_type = hal.ElementType.from_numpy(array.dtype)
        except ValueError:
            element_type = None
        if element_type is None or not expected.matches(array.shape, element_type):
            raise InputError(f"{where}: expected {expected}, got {describe_array(array)}"
                             f"{_conversion_hint(array, expected)}")
    if array.flags.c_contiguous:
        return array
    # A strided or broadcast view is copied: refuse one whose copy the machine cannot hold.
    check_input_size(where, describe_array(array), array.size, array.size * array.itemsize)
    # not np.ascontiguousarray: it turns a rank-0 array into shape (1,)
    return array.copy(order="C")


def _conversion_hint(array: np.ndarray, expected: TensorType) -> str:
    """What to write when only the width differs (f64 for f32, i64 for i32): numpy arrays are
    never converted implicitly (a float64 array passed as f32 would silently lose precision)."""
    want = expected.element_type.numpy_dtype()
    if array.dtype in (want, object) or not np.can_cast(array.dtype, want, "same_kind") or \
            not expected.matches(array.shape, expected.element_type):
        return ""
    return f"; convert it with .astype(np.{want.name})"


def to_buffer_view(value: Any, expected: TensorType | None, device: hal.Device,
                   where: str) -> hal.BufferView:
    """A buffer view on `device` holding `value` (a BufferView, or a DeviceArray of this
    device, is checked and passed through; a DeviceArray of another one is copied)."""
    if isinstance(value, DeviceArray):
        value = value.buffer_view if value.device is device else value.to_numpy()
    if isinstance(value, hal.BufferView):
        if expected is not None and not expected.matches(value.shape, value.element_type):
            raise InputError(f"{where}: expected {expected}, got {value.format_shape()}")
        return value
    if isinstance(value, TypedArray) and expected is None:
        typed: TypedArray | None = value
    elif expected is not None and not expected.element_type.has_numpy_dtype:
        typed = to_typed_array(value, expected, where)
    else:
        typed = None
    if typed is not None:
        buffer = _upload(device, typed.to_bytes() if typed.size else b"")
        return hal.BufferView(buffer, typed.shape, typed.element_type)
    array = to_array(value, expected, where)
    try:
        element_type = hal.ElementType.from_numpy(array.dtype)
    except ValueError:
        raise InputError(f"{where}: unsupported element type {array.dtype}") from None
    buffer = _upload(device, array.data.cast("B") if array.size else b"")
    return hal.BufferView(buffer, tuple(array.shape), element_type)


def _upload(device: hal.Device, data: bytes | memoryview) -> hal.Buffer:
    tracer = tracing.active
    if tracer is None:
        return device.allocator.allocate_with_data(data)
    with tracer.span("upload", "transfer", direction="upload", bytes=memoryview(data).nbytes,
                     device=device.info.name):
        return device.allocator.allocate_with_data(data)


def to_scalar(value: Any, bank: str, expected: TensorType | None, where: str) -> Any:
    """A Python number for an i32/i64/f32/f64 argument."""
    if expected is not None and not expected.element_type.has_numpy_dtype:
        array = to_typed_array(value, expected, where).values
    else:
        array = to_array(value, expected, where)
    if array.size != 1 or array.ndim > 1:
        raise InputError(f"{where}: expected a scalar {bank}, got {describe_array(array)}")
    item = array.reshape(()).item()
    return float(item) if bank in ("f32", "f64") else int(item)


def from_vm(value: Any) -> Any:
    """A result as the Python API returns it: buffer views become numpy arrays (TypedArrays
    for element types numpy lacks)."""
    if isinstance(value, hal.BufferView):
        if not value.element_type.has_numpy_dtype:
            return TypedArray(value.to_numpy(), value.element_type)
        return value.to_numpy()
    return value
