"""i32 and i1 ops and casts: wrap-around, the division/shift/saturation rules, predicates."""
from __future__ import annotations

import numpy as np
import pytest

from .cpu_kernel_builder import binary, elementwise, op, run, unary, workgroups_for

INT_MIN, INT_MAX = np.iinfo(np.int32).min, np.iinfo(np.int32).max


def _edge_ints(rng: np.random.Generator, n: int) -> np.ndarray:
    edges = np.array([0, 1, -1, 2, -2, 7, -7, 31, 32, 33, 100, INT_MIN, INT_MAX, INT_MIN + 1],
                     dtype=np.int32)
    rand = rng.integers(INT_MIN, INT_MAX, n, dtype=np.int64, endpoint=True).astype(np.int32)
    return np.concatenate([edges, rand])


def _pairs(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    a = _edge_ints(rng, 200)
    b = _edge_ints(rng, 200)
    a, b = (g.ravel() for g in np.meshgrid(a[:14], b[:14]))  # every edge against every edge
    more_a, more_b = _edge_ints(rng, 300)[14:], _edge_ints(rng, 300)[14:]
    return np.concatenate([a, more_a]), np.concatenate([b, more_b])


def _run_binary(device, name: str, a: np.ndarray, b: np.ndarray, out_type: str = "i32",
                **attrs) -> np.ndarray:
    out, = run(device, binary("k", name, "i32", out_type, a.size, tile_size=50, **attrs), [a, b],
               [((a.size,), out_type)], workgroups_for(a.size, 50))
    return out


def _trunc_div(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Reference truncating division in Python integers; x/0 and x%0 are 0, results wrap."""
    q, r = [], []
    for x, y in zip(a.tolist(), b.tolist()):
        if y == 0:
            q.append(0)
            r.append(0)
            continue
        qq = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
        q.append(qq)
        r.append(x - qq * y)
    wrap = lambda v: np.array(v, dtype=np.int64).astype(np.uint32).view(np.int32)  # noqa: E731
    return wrap(q), wrap(r)


@pytest.mark.parametrize("name, ref", [("arith.addi", np.add), ("arith.subi", np.subtract),
                                       ("arith.muli", np.multiply)])
def test_add_sub_mul_wrap_around(device, rng, name, ref):
    a, b = _pairs(rng)
    expected = ref(a.astype(np.int64), b.astype(np.int64)).astype(np.int32)
    np.testing.assert_array_equal(_run_binary(device, name, a, b), expected)


def test_signed_division_truncates_and_division_by_zero_gives_zero(device, rng):
    a, b = _pairs(rng)
    q, r = _trunc_div(a, b)
    np.testing.assert_array_equal(_run_binary(device, "arith.divsi", a, b), q)
    np.testing.assert_array_equal(_run_binary(device, "arith.remsi", a, b), r)
    edge = np.array([INT_MIN, 7, -7, 7, -7], np.int32), np.array([-1, 2, 2, -2, 0], np.int32)
    np.testing.assert_array_equal(_run_binary(device, "arith.divsi", *edge),
                                  [INT_MIN, 3, -3, -3, 0])
    np.testing.assert_array_equal(_run_binary(device, "arith.remsi", *edge), [0, 1, -1, 1, 0])


def test_unsigned_division(device, rng):
    a, b = _pairs(rng)
    au, bu = a.view(np.uint32).astype(np.int64), b.view(np.uint32).astype(np.int64)
    safe = np.where(bu == 0, 1, bu)
    q = np.where(bu == 0, 0, au // safe).astype(np.uint32).view(np.int32)
    r = np.where(bu == 0, 0, au % safe).astype(np.uint32).view(np.int32)
    np.testing.assert_array_equal(_run_binary(device, "arith.divui", a, b), q)
    np.testing.assert_array_equal(_run_binary(device, "arith.remui", a, b), r)


def test_shifts_by_large_amounts(device, rng):
    a = np.array([1, -1, INT_MIN, 0x1234, -8, 5, -5, 3], np.int32)
    b = np.array([31, 31, 1, 32, 33, -1, 40, 0], np.int32)
    np.testing.assert_array_equal(_run_binary(device, "arith.shli", a, b),
                                  [INT_MIN, INT_MIN, 0, 0, 0, 0, 0, 3])
    np.testing.assert_array_equal(_run_binary(device, "arith.shrui", a, b),
                                  [0, 1, 0x40000000, 0, 0, 0, 0, 3])
    np.testing.assert_array_equal(_run_binary(device, "arith.shrsi", a, b),
                                  [0, -1, INT_MIN // 2, 0, -1, 0, -1, 3])
    x = _edge_ints(rng, 100)
    s = rng.integers(0, 32, x.size).astype(np.int32)
    xu = x.view(np.uint32)
    np.testing.assert_array_equal(_run_binary(device, "arith.shli", x, s),
                                  (xu << s.astype(np.uint32)).view(np.int32))
    np.testing.assert_array_equal(_run_binary(device, "arith.shrui", x, s),
                                  (xu >> s.astype(np.uint32)).view(np.int32))
    np.testing.assert_array_equal(_run_binary(device, "arith.shrsi", x, s), x >> s)


@pytest.mark.parametrize("name, ref", [
    ("arith.andi", np.bitwise_and), ("arith.ori", np.bitwise_or), ("arith.xori", np.bitwise_xor),
    ("arith.maxsi", np.maximum), ("arith.minsi", np.minimum),
    ("arith.maxui", lambda a, b: np.maximum(a.view(np.uint32), b.view(np.uint32)).view(np.int32)),
    ("arith.minui", lambda a, b: np.minimum(a.view(np.uint32), b.view(np.uint32)).view(np.int32)),
])
def test_bitwise_and_min_max(device, rng, name, ref):
    a, b = _pairs(rng)
    np.testing.assert_array_equal(_run_binary(device, name, a, b), ref(a, b))


@pytest.mark.parametrize("predicate", ["eq", "ne", "slt", "sle", "sgt", "sge",
                                       "ult", "ule", "ugt", "uge"])
def test_cmpi_predicates(device, rng, predicate):
    a, b = _pairs(rng)
    au, bu = a.view(np.uint32), b.view(np.uint32)
    expected = {"eq": a == b, "ne": a != b, "slt": a < b, "sle": a <= b, "sgt": a > b,
                "sge": a >= b, "ult": au < bu, "ule": au <= bu, "ugt": au > bu,
                "uge": au >= bu}[predicate]
    out = _run_binary(device, "arith.cmpi", a, b, out_type="i1", predicate=predicate)
    np.testing.assert_array_equal(out, expected.astype(np.uint8))


def test_i1_arithmetic_and_compare(device):
    a = np.array([0, 0, 1, 1], np.uint8)
    b = np.array([0, 1, 0, 1], np.uint8)
    results = {}
    for name, pred in [("arith.addi", None), ("arith.muli", None), ("arith.ori", None),
                       ("arith.xori", None), ("arith.cmpi", "slt"), ("arith.cmpi", "ult")]:
        data = binary("b", name, "i1", "i1", 4, predicate=pred)
        results[name + (pred or "")], = run(device, data, [a, b], [((4,), "i1")], (1, 1, 1))
    np.testing.assert_array_equal(results["arith.addi"], [0, 1, 1, 0])
    np.testing.assert_array_equal(results["arith.muli"], [0, 0, 0, 1])
    np.testing.assert_array_equal(results["arith.ori"], [0, 1, 1, 1])
    np.testing.assert_array_equal(results["arith.xori"], [0, 1, 1, 0])
    np.testing.assert_array_equal(results["arith.cmpislt"], [0, 0, 1, 0])  # true is -1
    np.testing.assert_array_equal(results["arith.cmpiult"], [0, 1, 0, 0])


def _cast(device, name: str, x: np.ndarray, in_type: str, out_type: str) -> np.ndarray:
    out, = run(device, unary("c", name, in_type, out_type, x.size), [x], [((x.size,), out_type)],
               workgroups_for(x.size, 64))
    return out


def test_int_to_float_casts(device, rng):
    x = _edge_ints(rng, 300)
    np.testing.assert_array_equal(_cast(device, "arith.sitofp", x, "i32", "f32"),
                                  x.astype(np.float32))
    np.testing.assert_array_equal(_cast(device, "arith.uitofp", x, "i32", "f32"),
                                  x.view(np.uint32).astype(np.float32))
    flags = np.array([0, 1, 1, 0], np.uint8)
    np.testing.assert_array_equal(_cast(device, "arith.sitofp", flags, "i1", "f32"),
                                  [0, -1, -1, 0])
    np.testing.assert_array_equal(_cast(device, "arith.uitofp", flags, "i1", "f32"),
                                  [0, 1, 1, 0])


def test_float_to_int_casts_truncate_and_saturate(device):
    x = np.array([1.9, -1.9, 0.5, -0.5, 3e9, -3e9, 5e9, np.inf, -np.inf, np.nan,
                  2147483520.0, -2147483648.0], np.float32)
    np.testing.assert_array_equal(
        _cast(device, "arith.fptosi", x, "f32", "i32"),
        [1, -1, 0, 0, INT_MAX, INT_MIN, INT_MAX, INT_MAX, INT_MIN, 0, 2147483520, INT_MIN])
    expected_u = np.array([1, 0, 0, 0, 3_000_000_000, 0, 2 ** 32 - 1, 2 ** 32 - 1, 0, 0,
                           2147483520, 0], np.uint32)
    np.testing.assert_array_equal(_cast(device, "arith.fptoui", x, "f32", "i32"),
                                  expected_u.view(np.int32))


def test_bitcast_round_trip(device, rng):
    x = rng.standard_normal(100).astype(np.float32)
    x[:4] = [np.inf, -0.0, np.nan, 1e-45]
    bits = _cast(device, "arith.bitcast", x, "f32", "i32")
    np.testing.assert_array_equal(bits, x.view(np.int32))
    back = _cast(device, "arith.bitcast", bits, "i32", "f32")
    np.testing.assert_array_equal(back.view(np.int32), x.view(np.int32))


def test_extension_and_truncation_between_i1_and_i32(device):
    flags = np.array([0, 1, 0, 1], np.uint8)
    np.testing.assert_array_equal(_cast(device, "arith.extui", flags, "i1", "i32"), [0, 1, 0, 1])
    np.testing.assert_array_equal(_cast(device, "arith.extsi", flags, "i1", "i32"), [0, -1, 0, -1])
    x = np.array([0, 1, 2, 3, -1, -2, INT_MIN, INT_MAX], np.int32)
    np.testing.assert_array_equal(_cast(device, "arith.trunci", x, "i32", "i1"),
                                  [0, 1, 0, 1, 1, 0, 0, 1])


def test_absi_wraps_at_int_min(device):
    x = np.array([5, -5, 0, INT_MIN, INT_MAX], np.int32)
    np.testing.assert_array_equal(_cast(device, "math.absi", x, "i32", "i32"),
                                  [5, 5, 0, INT_MIN, INT_MAX])


def test_i32_constants_wrap_from_unsigned_spelling(device):
    ops = [op("arith.constant", result_type="i32", int_value=0xFFFFFFFF),
           op("arith.constant", result_type="i32", int_value=INT_MIN),
           op("arith.addi", 1, 2, result_type="i32")]
    data = elementwise("c", [3], [], ["i32"], ops, [3])
    out, = run(device, data, [], [((3,), "i32")], (1, 1, 1))
    np.testing.assert_array_equal(out, [INT_MAX] * 3)


def test_i1_division_and_min_max_follow_one_bit_arithmetic(device):
    """Signed i1 is {0, -1}: -1 / -1 = 1 wraps to -1; x / 0 = 0; remainders are 0."""
    a = np.array([0, 0, 1, 1], dtype=np.uint8)
    b = np.array([0, 1, 0, 1], dtype=np.uint8)
    expected = {"arith.divsi": [0, 0, 0, 1], "arith.divui": [0, 0, 0, 1],
                "arith.remsi": [0, 0, 0, 0], "arith.remui": [0, 0, 0, 0],
                "arith.maxsi": [0, 0, 0, 1], "arith.minsi": [0, 1, 1, 1],
                "arith.maxui": [0, 1, 1, 1], "arith.minui": [0, 0, 0, 1],
                "arith.shrsi": [0, 0, 1, 1], "arith.shli": [0, 0, 1, 0]}
    for name, want in expected.items():
        out, = run(device, binary("k", name, "i1", "i1", 4, tile_size=3), [a, b],
                   [((4,), "i1")], workgroups_for(4, 3))
        np.testing.assert_array_equal(out, want, err_msg=name)
