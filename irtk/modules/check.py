"""The `check` native module: IREE's `check.expect_*` ops at run time, for test programs.

IREE's end-to-end tests are MLIR functions that compute something and compare it with
`check.expect_eq` / `check.expect_almost_eq` / ...; the compiler turns each op into a call to
this module. As in IREE (gtest's EXPECT, not ASSERT), a failed check does not stop the
function: the module records a message and the program carries on, so one run reports every
mismatch. The runner (`irtk.check_runner`, `irtk check`) collects the messages after each call.

Buffer contents are read through the HAL (`Buffer.read`), so checks work on every driver, and
decoded per element type by `irtk.hal.numerics` (the storage rules the compiler and drivers
share) into float64 (floats) or int64 (integers), plus the raw storage bits, which `expect_eq`
compares (so +0.0 and -0.0 differ, while NaN equals NaN, as in IREE).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from irtk import hal
from irtk.hal import numerics
from irtk.errors import RuntimeFailure
from irtk.modules import hal_types
from irtk.types import scalar_type
from irtk.vm.native_module import NativeFunction, NativeModule
from irtk.vm.ref_types import ref_type_name

F = NativeFunction

# IREE's tolerances when `check.expect_almost_eq` gives none (the compiler passes them).
DEFAULT_ATOL = 1e-4
DEFAULT_RTOL = 0.0

MAX_LISTED_MISMATCHES = 4    # mismatching elements named in a message, beyond the first
MAX_PRINTED_ELEMENTS = 32    # elements of lhs/rhs shown in a message


@dataclass(frozen=True)
class Elements:
    """A buffer view's contents, flat: `values` (float64 or int64) and `bits` (the stored bit
    pattern of each element, for bitwise equality)."""

    shape: tuple[int, ...]
    element_type: hal.ElementType
    values: np.ndarray
    bits: np.ndarray

    @property
    def is_float(self) -> bool:
        return self.values.dtype.kind == "f"

    def type_text(self) -> str:
        return "x".join([str(d) for d in self.shape] + [self.element_type.name])


# -- decoding: the one place that knows how each element type is stored -------------------------

def storage_bytes(element_type: hal.ElementType, count: int) -> int:
    """Bytes that `count` elements occupy (i4 and f4 are packed two per byte, i2 four)."""
    try:
        return scalar_type(element_type.name).storage_bytes(count)
    except ValueError:
        raise RuntimeFailure(f"check: cannot decode elements of type {element_type.name}") \
            from None


def decode_storage(data: bytes, element_type: hal.ElementType, count: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(values, bits) of `count` elements stored in `data`, decoded by the HAL's numerics (the
    same rules the compiler and drivers use); RuntimeFailure for a type it does not know."""
    name = element_type.name
    try:
        values = numerics.decode(name, data, count)
        t = scalar_type(name)
    except ValueError:
        raise RuntimeFailure(f"check: cannot decode elements of type {name}") from None
    raw = np.frombuffer(data, np.uint8)
    if t.storage_dtype is None:   # packed sub-byte codes
        bits = numerics.unpack_codes(raw, count, t.storage_bits)
    else:
        size = t.storage_dtype.itemsize
        bits = raw[:count * size].view(np.dtype(f"<u{size}"))
    if element_type is hal.ElementType.i1:   # any nonzero byte is true
        bits = (bits != 0).astype(np.uint8)
    return values.astype(np.float64 if t.is_float else np.int64), bits


def read_elements(view: hal.BufferView) -> Elements:
    """The contents of `view`, read from its buffer through the HAL."""
    count = math.prod(view.shape)
    length = storage_bytes(view.element_type, count)
    try:
        data = view.buffer.read(view.byte_offset, length)
    except ValueError as e:
        raise RuntimeFailure(f"check: cannot read {view.format_shape()} contents: {e}") from None
    values, bits = decode_storage(data, view.element_type, count)
    return Elements(tuple(view.shape), view.element_type, values, bits)


# -- formatting values as messages show them ----------------------------------------------------

def format_value(value: Any, element_type: hal.ElementType) -> str:
    """The shortest text that tells this element's value apart in its own type."""
    if not isinstance(value, (float, np.floating)):
        return str(int(value))
    v = float(value)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if element_type is hal.ElementType.f64:
        text = repr(v)
    elif element_type is hal.ElementType.f16:
        text = str(np.float16(v))
    else:  # f32, and narrower floats whose values f32 holds exactly
        text = str(np.float32(v))
    return text[:-2] if text.endswith(".0") else text


def format_elements(elements: Elements, limit: int = MAX_PRINTED_ELEMENTS) -> str:
    """IREE's text of a tensor ("2x2xf32=[1 2][3 4]", floats as %G), elided past `limit`."""
    flat = elements.values
    shown = flat[:limit]
    if elements.is_float:
        items = ["%G" % float(v) for v in shown]
    else:
        items = [str(int(v)) for v in shown]
    if len(elements.shape) <= 1 or len(flat) > limit:
        body = " ".join(items)
    else:
        body = _nest(items, elements.shape)
    return f"{elements.type_text()}={body}" + ("..." if len(flat) > limit else "")


def _nest(items: list[str], shape: tuple[int, ...]) -> str:
    if len(shape) == 1:
        return " ".join(items)
    step = len(items) // shape[0] if shape[0] else 0
    return "".join("[" + _nest(items[i * step:(i + 1) * step], shape[1:]) + "]"
                   for i in range(shape[0]))


def format_tolerance(value: float) -> str:
    return "%G" % value


# -- the module ---------------------------------------------------------------------------------

def _view(value: Any, function: str, what: str) -> hal.BufferView:
    if not isinstance(value, hal.BufferView):  # the class that carries BUFFER_VIEW
        raise RuntimeFailure(f"check.{function}: {what} must be a {hal_types.BUFFER_VIEW.name}, "
                             f"got {ref_type_name(value)}")
    return value


def _device(value: Any, function: str) -> None:
    if value is not None and not isinstance(value, hal_types.DEVICE.classes):
        raise RuntimeFailure(f"check.{function}: device must be a {hal_types.DEVICE.name}, "
                             f"got {ref_type_name(value)}")


class CheckModule(NativeModule):
    """`check.*` imports; failed expectations accumulate in `failures` until taken."""

    name = "check"
    EXPORTS = (
        F("expect_all_true", "0rr_v"),
        F("expect_almost_eq", "0rrrff_v"),
        F("expect_eq", "0rrr_v"),
        F("expect_false", "0i_v"),
        F("expect_true", "0i_v"),
    )

    def __init__(self) -> None:
        self.failures: list[str] = []

    def take_failures(self) -> list[str]:
        """The messages recorded since the last call, oldest first; clears them."""
        taken, self.failures = self.failures, []
        return taken

    def _fail(self, message: str) -> None:
        self.failures.append(message)

    # -- scalars ---------------------------------------------------------------------------------

    def expect_true(self, operand: int) -> None:
        if operand == 0:
            self._fail("Expected true but got 0 (false)")

    def expect_false(self, operand: int) -> None:
        if operand != 0:
            self._fail(f"Expected false but got {operand} (true)")

    # -- tensors ---------------------------------------------------------------------------------

    def expect_all_true(self, device: Any, operand: Any) -> None:
        _device(device, "expect_all_true")
        elements = read_elements(_view(operand, "expect_all_true", "operand"))
        false_at = np.flatnonzero(elements.values == 0)
        if false_at.size:
            listed = ", ".join(str(int(i)) for i in false_at[:MAX_LISTED_MISMATCHES])
            more = ", ..." if false_at.size > MAX_LISTED_MISMATCHES else ""
            self._fail(f"Expected all true but {false_at.size} of {elements.values.size} "
                       f"elements are false (at index {listed}{more})\n"
                       f"  value:\n    {format_elements(elements)}")

    def expect_eq(self, device: Any, lhs: Any, rhs: Any) -> None:
        _device(device, "expect_eq")
        left = read_elements(_view(lhs, "expect_eq", "lhs"))
        right = read_elements(_view(rhs, "expect_eq", "rhs"))
        header = "Expected equality of these values."
        if not self._same_type_and_shape(header, left, right):
            return
        equal = left.bits == right.bits
        if left.is_float:
            equal |= np.isnan(left.values) & np.isnan(right.values)
        self._report_mismatches(header + " Contents does not match.", left, right, equal)

    def expect_almost_eq(self, device: Any, lhs: Any, rhs: Any, atol: float,
                         rtol: float) -> None:
        """|lhs - rhs| <= atol + rtol * |rhs| in float64; NaN matches only NaN, inf only the
        same inf."""
        _device(device, "expect_almost_eq")
        left = read_elements(_view(lhs, "expect_almost_eq", "lhs"))
        right = read_elements(_view(rhs, "expect_almost_eq", "rhs"))
        header = (f"Expected near equality of these values with tolerances "
                  f"atol={format_tolerance(atol)}, rtol={format_tolerance(rtol)}.")
        if not self._same_type_and_shape(header, left, right):
            return
        self._report_mismatches(header, left, right,
                                _near(left.values, right.values, float(atol), float(rtol)))

    def _same_type_and_shape(self, header: str, left: Elements, right: Elements) -> bool:
        problems = []
        if left.element_type != right.element_type:
            problems.append(" Element types do not match.")
        if left.shape != right.shape:
            problems.append(" Shapes do not match.")
        if problems:
            self._fail(header + "".join(problems) + _operands(left, right))
            return False
        return True

    def _report_mismatches(self, header: str, left: Elements, right: Elements,
                           equal: np.ndarray) -> None:
        bad = np.flatnonzero(~equal)
        if not bad.size:
            return
        et = left.element_type
        first = int(bad[0])
        text = (f"{header} The first failure occurs at index {first} as the lhs value "
                f"{format_value(left.values[first], et)} differs from the rhs value "
                f"{format_value(right.values[first], et)}.")
        listed = [f"index {int(i)}: {format_value(left.values[i], et)} vs "
                  f"{format_value(right.values[i], et)}"
                  for i in bad[:MAX_LISTED_MISMATCHES]]
        more = "; ..." if bad.size > MAX_LISTED_MISMATCHES else ""
        text += (f"\n  {bad.size} of {equal.size} elements differ: " + "; ".join(listed) + more)
        self._fail(text + _operands(left, right))


def _near(lhs: np.ndarray, rhs: np.ndarray, atol: float, rtol: float) -> np.ndarray:
    """Elementwise |lhs - rhs| <= atol + rtol * |rhs|. Floats in float64 (NaN matches NaN, an
    infinity only itself); integers with an exact difference, which float64 would round for
    64-bit values."""
    if lhs.dtype.kind == "f":
        with np.errstate(invalid="ignore", over="ignore"):
            close = np.abs(lhs - rhs) <= atol + rtol * np.abs(rhs)
            return (lhs == rhs) | (np.isnan(lhs) & np.isnan(rhs)) | (
                close & np.isfinite(lhs) & np.isfinite(rhs))
    equal = lhs == rhs
    for i in np.flatnonzero(~equal):   # Python ints: exact for any width
        a, b = int(lhs[i]), int(rhs[i])
        equal[i] = abs(a - b) <= atol + rtol * abs(b)
    return equal


def _operands(left: Elements, right: Elements) -> str:
    return f"\n  lhs:\n    {format_elements(left)}\n  rhs:\n    {format_elements(right)}"
