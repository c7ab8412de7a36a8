"""The `check` module: each import with passing and failing inputs, for every element type,
on every device; message format; NaN, inf and signed zeros; tolerance semantics; shape and
type mismatches; calls from bytecode (linking, EXPECT semantics)."""
from __future__ import annotations

import re
import zlib

import numpy as np
import pytest

from irtk import hal
from irtk.errors import RuntimeFailure, VerificationError
from irtk.hal import registry
from irtk.modules.check import CheckModule, read_elements
from irtk.vm import Context, load_module
from irtk.vm.writer import FunctionBuilder, ModuleWriter
from tests.conftest import all_device_uris
from tests.modules.check_programs import checks_module
from tests.vm.helpers import i64

ET = hal.ElementType
FLOAT_TYPES = [ET.f16, ET.bf16, ET.f32, ET.f64]
INT_TYPES = [ET.i8, ET.i16, ET.i32, ET.i64]
ALL_TYPES = [ET.i1, *INT_TYPES, *FLOAT_TYPES]


# -- storing values the way each type does (numpy is the reference) -----------------------------

def rounded(et: hal.ElementType, values: np.ndarray) -> np.ndarray:
    """`values` as the type stores them, back in float64 / int64."""
    if et is ET.bf16:
        bits = (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint32)
        return (bits << 16).view(np.float32).astype(np.float64)
    if et is ET.i1:
        return (np.asarray(values) != 0).astype(np.int64)
    dtype = et.numpy_dtype()
    kind = np.float64 if dtype.kind == "f" else np.int64
    return np.asarray(values).astype(dtype).astype(kind)


def encode(et: hal.ElementType, values: np.ndarray) -> bytes:
    if et is ET.bf16:
        return (np.asarray(values, np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
    if et is ET.i1:
        return (np.asarray(values) != 0).astype(np.uint8).tobytes()
    return np.asarray(values).astype(et.numpy_dtype()).tobytes()


def random_values(et: hal.ElementType, rng: np.random.Generator, shape) -> np.ndarray:
    if et.is_float:
        return rounded(et, rng.standard_normal(shape) * 4)
    if et is ET.i1:
        return rng.integers(0, 2, shape)
    info = np.iinfo(et.numpy_dtype())
    return rng.integers(info.min, info.max, shape, endpoint=True, dtype=np.int64)


def view(device: hal.Device, et: hal.ElementType, values, shape=None,
         prefix: bytes = b"") -> hal.BufferView:
    """A buffer view of `values` on `device`; `prefix` bytes come first (a view at an offset)."""
    values = np.asarray(values)
    data = prefix + encode(et, values)
    buffer = device.allocator.allocate_with_data(data)
    return hal.BufferView(buffer, tuple(values.shape if shape is None else shape), et,
                          len(prefix))


@pytest.fixture(scope="module", params=all_device_uris())
def device(request) -> hal.Device:
    return registry.get_device(request.param)


@pytest.fixture
def local() -> hal.Device:
    return registry.get_device("local-sync")


@pytest.fixture
def rng(request) -> np.random.Generator:
    """Seeded by the test's name: fresh data per test, the same on every run."""
    return np.random.default_rng(zlib.crc32(request.node.name.encode()))


# -- decoding -----------------------------------------------------------------------------------

@pytest.mark.parametrize("et", ALL_TYPES, ids=lambda e: e.name)
def test_contents_read_through_the_hal_decode_per_type(device, et, rng):
    values = random_values(et, rng, (3, 5))
    elements = read_elements(view(device, et, values, prefix=b"\x5a" * 8))
    assert elements.shape == (3, 5) and elements.element_type is et
    np.testing.assert_array_equal(elements.values, values.reshape(-1))
    assert elements.values.dtype == (np.float64 if et.is_float else np.int64)


def test_every_hal_element_type_is_decoded(local, rng):
    for et in hal.ElementType:
        raw = rng.integers(0, 256, 16 * ((et.storage_bits + 7) // 8), dtype=np.uint8).tobytes()
        buffer = local.allocator.allocate_with_data(raw)
        elements = read_elements(hal.BufferView(buffer, (16,), et))
        assert elements.values.shape == (16,), et.name


# -- expect_true / expect_false -----------------------------------------------------------------

def test_expect_true_and_false():
    check = CheckModule()
    for value in (1, -1, 7, 2**31 - 1):
        check.expect_true(value)
    check.expect_false(0)
    assert check.take_failures() == []
    check.expect_true(0)
    check.expect_false(3)
    assert check.take_failures() == ["Expected true but got 0 (false)",
                                     "Expected false but got 3 (true)"]
    assert check.take_failures() == []


# -- expect_all_true ----------------------------------------------------------------------------

@pytest.mark.parametrize("et", ALL_TYPES, ids=lambda e: e.name)
def test_expect_all_true_per_type(device, et, rng):
    check = CheckModule()
    values = random_values(et, rng, 12)
    values[values == 0] = 1
    check.expect_all_true(device, view(device, et, values))
    assert check.take_failures() == []
    values[[2, 9]] = 0
    check.expect_all_true(device, view(device, et, values))
    (message,) = check.take_failures()
    assert message.startswith("Expected all true but 2 of 12 elements are false "
                              "(at index 2, 9)")


def test_expect_all_true_counts_nan_as_true_and_negative_zero_as_false(local):
    check = CheckModule()
    check.expect_all_true(local, view(local, ET.f32, np.array([np.nan, np.inf, -1.0])))
    assert check.take_failures() == []
    check.expect_all_true(local, view(local, ET.f32, np.array([1.0, -0.0])))
    assert "at index 1" in check.take_failures()[0]


def test_expect_all_true_on_i1_reads_any_nonzero_byte_as_true(local):
    buffer = local.allocator.allocate_with_data(bytes([1, 2, 255, 0]))
    check = CheckModule()
    check.expect_all_true(local, hal.BufferView(buffer, (3,), ET.i1))
    check.expect_all_true(local, hal.BufferView(buffer, (4,), ET.i1))
    (message,) = check.take_failures()
    assert "1 of 4 elements are false (at index 3)" in message


# -- expect_eq ----------------------------------------------------------------------------------

@pytest.mark.parametrize("et", ALL_TYPES, ids=lambda e: e.name)
def test_expect_eq_per_type(device, et, rng):
    check = CheckModule()
    values = random_values(et, rng, (4, 6))
    check.expect_eq(device, view(device, et, values), view(device, et, values.copy()))
    assert check.take_failures() == []
    other = values.copy()
    x = other[2, 1]
    if et.is_float:
        other[2, 1] = rounded(et, np.array([x + 1 + abs(x)]))[0]
    else:
        other[2, 1] = x ^ 1
    assert other[2, 1] != values[2, 1]
    check.expect_eq(device, view(device, et, values), view(device, et, other))
    (message,) = check.take_failures()
    assert message.startswith("Expected equality of these values. Contents does not match. "
                              "The first failure occurs at index 13 as the lhs value ")
    assert "\n  1 of 24 elements differ: index 13: " in message
    assert f"\n  lhs:\n    4x6x{et.name}=[" in message and f"\n  rhs:\n    4x6x{et.name}=[" \
        in message


def test_expect_eq_message_names_values_and_lists_a_few_mismatches(local):
    check = CheckModule()
    lhs = np.array([1, 2, 3, 1.5, 5, 6, 7, 8, 9, 10], np.float32)
    rhs = lhs.copy()
    rhs[[3, 5, 6, 7, 8, 9]] = [1.25, 0, 0, 0, 0, 0]
    check.expect_eq(local, view(local, ET.f32, lhs), view(local, ET.f32, rhs))
    (message,) = check.take_failures()
    assert message == (
        "Expected equality of these values. Contents does not match. The first failure occurs "
        "at index 3 as the lhs value 1.5 differs from the rhs value 1.25.\n"
        "  6 of 10 elements differ: index 3: 1.5 vs 1.25; index 5: 6 vs 0; index 6: 7 vs 0; "
        "index 7: 8 vs 0; ...\n"
        "  lhs:\n    10xf32=1 2 3 1.5 5 6 7 8 9 10\n"
        "  rhs:\n    10xf32=1 2 3 1.25 5 0 0 0 0 0")


def test_expect_eq_floats_are_bitwise_except_nan_equals_nan(local):
    check = CheckModule()
    nan_a = np.array([0x7FC00000], np.uint32).view(np.float32)[0]
    nan_b = np.array([0xFFC00123], np.uint32).view(np.float32)[0]   # another payload and sign
    lhs = np.array([nan_a, np.inf, -np.inf, 1e-45], np.float32)
    rhs = np.array([nan_b, np.inf, -np.inf, 1e-45], np.float32)
    check.expect_eq(local, view(local, ET.f32, lhs), view(local, ET.f32, rhs))
    assert check.take_failures() == []
    check.expect_eq(local, view(local, ET.f32, [0.0, 1.0]), view(local, ET.f32, [-0.0, 1.0]))
    (message,) = check.take_failures()
    assert "index 0 as the lhs value 0 differs from the rhs value -0" in message
    check.expect_eq(local, view(local, ET.f32, [np.nan]), view(local, ET.f32, [1.0]))
    assert "lhs value nan differs from the rhs value 1" in check.take_failures()[0]


def test_expect_eq_distinguishes_values_that_print_alike_in_six_digits(local):
    check = CheckModule()
    a = np.float32(1.0)
    b = np.nextafter(a, np.float32(2))
    check.expect_eq(local, view(local, ET.f32, [a]), view(local, ET.f32, [b]))
    assert "lhs value 1 differs from the rhs value 1.0000001" in check.take_failures()[0]


def test_expect_eq_shape_and_type_mismatches_are_recorded_not_raised(local):
    check = CheckModule()
    check.expect_eq(local, view(local, ET.i32, np.arange(6)),
                    view(local, ET.i32, np.arange(6), shape=(2, 3)))
    check.expect_eq(local, view(local, ET.i32, [1, 2]), view(local, ET.f32, [1, 2]))
    check.expect_eq(local, view(local, ET.i32, [1, 2]), view(local, ET.i64, [1, 2, 3]))
    shape, types, both = check.take_failures()
    assert shape == ("Expected equality of these values. Shapes do not match.\n"
                     "  lhs:\n    6xi32=0 1 2 3 4 5\n  rhs:\n    2x3xi32=[0 1 2][3 4 5]")
    assert types.startswith("Expected equality of these values. Element types do not match.\n")
    assert both.startswith("Expected equality of these values. Element types do not match. "
                           "Shapes do not match.\n")


def test_messages_elide_large_tensors(local, rng):
    check = CheckModule()
    values = rng.standard_normal(1000).astype(np.float32)
    check.expect_eq(local, view(local, ET.f32, values), view(local, ET.f32, values + 1))
    message = check.take_failures()[0]
    assert "1000 of 1000 elements differ" in message
    assert message.count("...") == 3 and len(message) < 1500


def test_scalar_views(local):
    check = CheckModule()
    check.expect_eq(local, view(local, ET.i64, np.int64(5)), view(local, ET.i64, np.int64(6)))
    assert "\n  lhs:\n    i64=5\n  rhs:\n    i64=6" in check.take_failures()[0]


# -- expect_almost_eq ---------------------------------------------------------------------------

@pytest.mark.parametrize("et", FLOAT_TYPES + INT_TYPES, ids=lambda e: e.name)
def test_expect_almost_eq_per_type(device, et, rng):
    """Differences within atol pass and one just beyond fails, computed in float64 on the
    decoded values."""
    check = CheckModule()
    lhs = random_values(et, rng, 20)
    rhs = lhs.copy()
    atol = 0.5 if et.is_float else 1.0
    if et.is_float:
        shift = rounded(et, lhs + 0.25) - lhs      # what a 0.25 step rounds to in this type
        rhs = lhs + np.where(np.abs(shift) <= atol, shift, 0)
    else:
        info = np.iinfo(et.numpy_dtype())
        rhs = np.clip(lhs + rng.integers(-1, 2, 20), info.min, info.max)
    rhs = rounded(et, rhs)
    assert np.all(np.abs(lhs - rhs) <= atol)
    check.expect_almost_eq(device, view(device, et, lhs), view(device, et, rhs), atol, 0.0)
    assert check.take_failures() == []
    far = rhs.copy()
    far[7] = rounded(et, np.array([lhs[7] + (3 if lhs[7] < 0 else -3)]))[0]
    check.expect_almost_eq(device, view(device, et, lhs), view(device, et, far), atol, 0.0)
    (message,) = check.take_failures()
    assert message.startswith(f"Expected near equality of these values with tolerances "
                              f"atol={'%G' % atol}, rtol=0. The first failure occurs at index 7 ")


def test_expect_almost_eq_message_with_default_tolerances(local):
    check = CheckModule()
    lhs = np.array([1, 2, 3, 1.5], np.float32)
    rhs = np.array([1, 2.00001, 3, 1.25], np.float32)
    check.expect_almost_eq(local, view(local, ET.f32, lhs), view(local, ET.f32, rhs),
                           float(np.float32(1e-4)), 0.0)
    (message,) = check.take_failures()
    assert message == (
        "Expected near equality of these values with tolerances atol=0.0001, rtol=0. The first "
        "failure occurs at index 3 as the lhs value 1.5 differs from the rhs value 1.25.\n"
        "  1 of 4 elements differ: index 3: 1.5 vs 1.25\n"
        "  lhs:\n    4xf32=1 2 3 1.5\n"
        "  rhs:\n    4xf32=1 2.00001 3 1.25")


def test_expect_almost_eq_relative_tolerance_scales_with_rhs(local):
    """|lhs - rhs| <= atol + rtol * |rhs|: the bound uses rhs, not lhs."""
    check = CheckModule()
    lhs = np.array([100.0, 0.0], np.float64)
    rhs = np.array([111.0, 0.0], np.float64)
    check.expect_almost_eq(local, view(local, ET.f64, lhs), view(local, ET.f64, rhs), 0.0, 0.1)
    assert check.take_failures() == []        # 11 <= 0.1 * 111
    check.expect_almost_eq(local, view(local, ET.f64, rhs), view(local, ET.f64, lhs), 0.0, 0.1)
    assert "index 0 as the lhs value 111 differs from the rhs value 100" \
        in check.take_failures()[0]           # 11 > 0.1 * 100
    check.expect_almost_eq(local, view(local, ET.f64, [1.0]), view(local, ET.f64, [1.5]),
                           0.25, 0.2)         # 0.5 <= 0.25 + 0.2 * 1.5 = 0.55
    assert check.take_failures() == []


def test_expect_almost_eq_nan_and_inf(local):
    check = CheckModule()
    special = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    check.expect_almost_eq(local, view(local, ET.f32, special), view(local, ET.f32, special),
                           1e-4, 0.0)
    assert check.take_failures() == []
    for lhs, rhs in ((np.nan, 1.0), (1.0, np.nan), (np.inf, -np.inf), (np.inf, 1e30)):
        check.expect_almost_eq(local, view(local, ET.f32, [lhs]), view(local, ET.f32, [rhs]),
                               1e-4, 1.0)
        assert len(check.take_failures()) == 1, (lhs, rhs)


def test_expect_almost_eq_mismatched_shapes_and_types(local):
    check = CheckModule()
    check.expect_almost_eq(local, view(local, ET.f32, [1.0, 2.0]),
                           view(local, ET.f32, [1.0, 2.0, 3.0]), 1e-4, 0.0)
    check.expect_almost_eq(local, view(local, ET.f32, [1.0]), view(local, ET.f16, [1.0]),
                           1e-4, 0.0)
    shapes, types = check.take_failures()
    assert shapes.startswith("Expected near equality of these values with tolerances "
                             "atol=0.0001, rtol=0. Shapes do not match.\n")
    assert "Element types do not match." in types and "rhs:\n    1xf16=1" in types


# -- bad operands -------------------------------------------------------------------------------

def test_non_view_operands_raise_naming_the_import_and_operand(local):
    check = CheckModule()
    good = view(local, ET.f32, [1.0])
    with pytest.raises(RuntimeFailure, match=r"check.expect_eq: rhs must be a "
                                             r"!hal.buffer_view, got null"):
        check.expect_eq(local, good, None)
    with pytest.raises(RuntimeFailure, match=r"check.expect_all_true: operand must be a "
                                             r"!hal.buffer_view, got !hal.buffer"):
        check.expect_all_true(local, good.buffer)
    with pytest.raises(RuntimeFailure, match=r"check.expect_almost_eq: device must be a "
                                             r"!hal.device"):
        check.expect_almost_eq(good, good, good, 1e-4, 0.0)


def test_a_view_past_the_end_of_its_buffer_raises(local):
    buffer = local.allocator.allocate_with_data(b"\0" * 8)
    with pytest.raises(RuntimeFailure, match=r"check: cannot read 4xf32 contents"):
        read_elements(hal.BufferView(buffer, (4,), ET.f32))


# -- from bytecode ------------------------------------------------------------------------------

def test_the_compiler_imports_every_check_function_with_its_calling_convention():
    from irtk.compiler.driver import compile_program
    from tests.e2e.test_checks_and_constants import checks_program
    module = load_module(compile_program(checks_program(np.zeros(6, np.float32)), target="cpu"))
    emitted = {i.full_name: i.calling_convention for i in module.imports
               if i.full_name.startswith("check.")}
    assert emitted == {f"check.{f.name}": f.calling_convention for f in CheckModule.EXPORTS}


def test_a_failed_check_in_bytecode_does_not_stop_the_function(local):
    from irtk.modules.hal import HalModule
    check = CheckModule()
    ctx = Context(load_module(checks_module()), [HalModule(local), check])
    assert ctx.call("two_fail_then_return") == [7]
    assert check.take_failures() == ["Expected true but got 0 (false)",
                                     "Expected false but got 5 (true)"]
    ctx.call("all_pass")
    assert check.take_failures() == []


def test_views_passed_from_bytecode_are_compared(device, rng):
    from irtk.modules.hal import HalModule
    check = CheckModule()
    ctx = Context(load_module(checks_module()), [HalModule(device), check])
    a = rng.standard_normal(4).astype(np.float32)
    ctx.call("compare_near", [view(device, ET.f32, a), view(device, ET.f32, a + 0.005)])
    assert check.take_failures() == []
    ctx.call("compare_eq", [view(device, ET.f32, a), view(device, ET.f32, a + 0.005)])
    (message,) = check.take_failures()
    assert re.match(r"Expected equality of these values\. Contents does not match\. The first "
                    r"failure occurs at index 0 ", message)


def test_an_import_with_another_signature_fails_at_link():
    w = ModuleWriter("wrong")
    ordinal = w.add_import("check.expect_true", "0I_v")
    b = FunctionBuilder()
    b.emit("const.i64", i64(0), 1)
    b.emit("call.import", ordinal, [i64(0)], [])
    b.emit("return", [])
    w.add_export("main", w.add_function("main", "0v_v", b))
    with pytest.raises(VerificationError, match=r"check.expect_true: module expects 0I_v, "
                                                r"runtime provides 0i_v"):
        Context(load_module(w.to_bytes()), [CheckModule()])
