"""Every scalar type on SwiftShader and lavapipe: storage of each width (packed i4/f4, bytes,
halves, two-word 64-bit values), the narrow float formats bit for bit, arithmetic that wraps
narrow integers and rounds narrow floats, and 64-bit types where the profile has them."""
from __future__ import annotations

import numpy as np
import pytest

from irtk.compiler.codegen.spirv.float_formats import FORMATS
from irtk.compiler.kernel import AffineMap, Kernel, Op, Operand
from irtk.compiler.targets import VULKAN_PROFILES
from irtk.errors import CompileError
from irtk.types import scalar_type

from .kernels import identity
from .reference import decode, encode, run_reference

SMALL_FLOATS = [name for name in FORMATS]
BITS_TYPE = {4: "i4", 8: "i8", 16: "i16"}
F32_TINY = 2.0 ** -126   # drivers may flush f32 denormals


def unary(name: str, src: str, dst: str, n: int, op: str, **fields) -> Kernel:
    return Kernel(name, (n,), [Operand(0, src, (n,), identity(1))],
                  [Operand(1, dst, (n,), identity(1))], [Op(op, (0,), dst, **fields)], [2])


def binary(name: str, kind: str, out: str, n: int, op: str, **fields) -> Kernel:
    return Kernel(name, (n,), [Operand(0, kind, (n,), identity(1)),
                               Operand(1, kind, (n,), identity(1))],
                  [Operand(2, out, (n,), identity(1))], [Op(op, (0, 1), out, **fields)], [3])


def _close_or_flushed(got: np.ndarray, expected: np.ndarray) -> None:
    flushed = (np.abs(expected) < F32_TINY) & (got == 0)
    np.testing.assert_array_equal(np.where(flushed, expected, got), expected)


@pytest.mark.parametrize("kind", SMALL_FLOATS)
def test_every_bit_pattern_decodes_exactly(vulkan, kind):
    """bits -> bitcast -> extf to f32, for all 2^width patterns of the format."""
    fmt = FORMATS[kind]
    bits = np.arange(1 << fmt.bits, dtype=np.int64)
    int_type = BITS_TYPE[fmt.bits]
    n = bits.size
    kernel = Kernel(f"decode_{kind}", (n,), [Operand(0, int_type, (n,), identity(1))],
                    [Operand(1, "f32", (n,), identity(1))],
                    [Op("arith.bitcast", (0,), kind), Op("arith.extf", (2,), "f32")], [3])
    signed = np.where(bits >= 1 << (fmt.bits - 1), bits - (1 << fmt.bits), bits)
    got = vulkan.run(kernel, [signed])[0]
    expected = decode(kind, bits)
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(got), nan)
    _close_or_flushed(got[~nan], expected[~nan])


def rounding_samples(kind: str, rng: np.random.Generator) -> np.ndarray:
    """f32 values (as float64) that probe rounding to `kind`: every finite value of the type,
    every tie between neighbours and one f32 ulp either side of it, random values across and
    beyond its range, and the specials (f32 denormals left out: drivers may flush them)."""
    fmt = FORMATS[kind]
    table = decode(kind, np.arange(1 << fmt.bits))
    finite = np.unique(table[np.isfinite(table) & (np.abs(table) >= F32_TINY)])
    mids = ((finite[1:] + finite[:-1]) / 2).astype(np.float32)       # exact ties
    near = np.concatenate([np.nextafter(mids, np.float32(np.inf)),
                           np.nextafter(mids, np.float32(-np.inf)), mids])
    top = float(np.max(finite))
    samples = np.concatenate([
        finite, near, rng.uniform(-2 * top, 2 * top, 500),
        rng.standard_normal(300) * 10.0 ** rng.integers(-8, 8, 300),
        [np.inf, -np.inf, np.nan, 0.0, -0.0, top * 1.5, -top * 4]])
    with np.errstate(over="ignore"):   # bf16's top * 4 is past f32: it becomes inf
        x = samples.astype(np.float32).astype(np.float64)
    return x[(np.abs(x) >= F32_TINY) | (x == 0) | ~np.isfinite(x)]


def spirv_bits(kind: str, x: np.ndarray) -> np.ndarray:
    """The bits the SPIR-V generator rounds f32 values `x` to: `irtk.hal.numerics`' (the CPU
    reference's), but for f8E8M0FNU, whose rules differ between the two backends
    (docs/codegen_spirv.md, docs/cpu_kernels.md): there the SPIR-V code takes zero to NaN
    (numerics: 2^-127) and a tie between two powers of two to the even exponent, so the tie
    above 2^127 to 2^127 (numerics: up, to the odd one, and past 2^127 to NaN)."""
    want = encode(kind, x)
    if kind != "f8E8M0FNU":
        return want
    fraction, exponent = np.frexp(x)
    code = exponent + 126                     # of the power of two below a tie 1.5 * 2^k
    want = np.where((fraction == 0.75) & (code % 2 == 0), code, want)
    return np.where(x == 0, 0xFF, want)


@pytest.mark.parametrize("kind", SMALL_FLOATS)
def test_f32_rounds_to_nearest_even_with_the_format_rules(vulkan, rng, kind):
    """f32 -> truncf -> bitcast -> the stored bits, against the rounding of irtk.hal.numerics
    (which tests/hal/test_numerics.py checks against brute force)."""
    fmt = FORMATS[kind]
    x = rounding_samples(kind, rng)
    n = x.size
    int_type = BITS_TYPE[fmt.bits]
    kernel = Kernel(f"encode_{kind}", (n,), [Operand(0, "f32", (n,), identity(1))],
                    [Operand(1, int_type, (n,), identity(1))],
                    [Op("arith.truncf", (0,), kind), Op("arith.bitcast", (2,), int_type)], [3])
    got = vulkan.run(kernel, [x])[0] & ((1 << fmt.bits) - 1)
    want = spirv_bits(kind, x)
    got_nan, want_nan = np.isnan(decode(kind, got)), np.isnan(decode(kind, want))
    np.testing.assert_array_equal(got_nan, want_nan)
    np.testing.assert_array_equal(got[~want_nan], want[~want_nan])


@pytest.mark.parametrize("kind", SMALL_FLOATS)
def test_rounding_in_registers_matches_the_bits_at_every_boundary(vulkan, rng, kind):
    """f32 -> truncf -> extf: the value rounding leaves in an f32 register (the fast path
    of float_formats.round_to) is the value of the stored bits, at every tie between two
    neighbouring values and one f32 ulp either side of it, the type's subnormals, overflow
    and the specials."""
    x = rounding_samples(kind, rng)
    n = x.size
    kernel = Kernel(f"round_{kind}", (n,), [Operand(0, "f32", (n,), identity(1))],
                    [Operand(1, "f32", (n,), identity(1))],
                    [Op("arith.truncf", (0,), kind), Op("arith.extf", (2,), "f32")], [3])
    got = vulkan.run(kernel, [x])[0]
    want = decode(kind, spirv_bits(kind, x))
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    _close_or_flushed(got[~nan], want[~nan])
    np.testing.assert_array_equal(np.signbit(got[~nan]), np.signbit(want[~nan]))


@pytest.mark.parametrize("kind", ["f16", "bf16", "f8E4M3FN", "f8E5M2"])
def test_narrow_float_arithmetic_rounds_after_every_op(vulkan, rng, kind):
    n = 400
    ops = [Op("arith.mulf", (0, 1), kind), Op("arith.addf", (3, 0), kind),
           Op("math.exp", (4,), kind), Op("arith.divf", (5, 1), kind)]
    kernel = Kernel(f"chain_{kind}", (n,), [Operand(0, kind, (n,), identity(1)),
                                            Operand(1, kind, (n,), identity(1))],
                    [Operand(2, kind, (n,), identity(1))], ops, [6])
    a, b = rng.uniform(-2, 2, n), rng.uniform(0.5, 2, n)
    a, b = decode(kind, encode(kind, a)), decode(kind, encode(kind, b))
    got = vulkan.run(kernel, [a, b])[0]
    expected = run_reference(kernel, [a, b])[0]
    # f32 math (exp) may differ by an f32 ulp, which can flip one rounding of the type.
    ulp = 2.0 ** -FORMATS[kind].mantissa_bits
    np.testing.assert_allclose(got, expected, rtol=2.1 * ulp, atol=1e-6)


@pytest.mark.parametrize("kind", ["i4", "i8", "i16"])
@pytest.mark.parametrize("op", ["arith.addi", "arith.muli", "arith.divsi", "arith.divui",
                                "arith.remui", "arith.shrui", "arith.shrsi", "arith.shli",
                                "arith.maxui", "arith.minsi", "arith.xori",
                                "arith.floordivsi", "arith.ceildivsi", "arith.ceildivui"])
def test_narrow_integer_ops_wrap(vulkan, rng, kind, op):
    n = 333   # odd: the last word of packed outputs is partial
    width = scalar_type(kind).bits
    lo, hi = -(1 << (width - 1)), 1 << (width - 1)
    a, b = rng.integers(lo, hi, n), rng.integers(lo, hi, n)
    if "sh" in op:
        b = rng.integers(0, width + 3, n)
    kernel = binary(f"{op[6:]}_{kind}", kind, kind, n, op)
    got = vulkan.run(kernel, [a, b])[0]
    np.testing.assert_array_equal(got, run_reference(kernel, [a, b])[0])


@pytest.mark.parametrize("src, dst, op", [
    ("i8", "i32", "arith.extsi"), ("i8", "i32", "arith.extui"), ("i32", "i8", "arith.trunci"),
    ("i16", "i4", "arith.trunci"), ("i4", "i16", "arith.extui"), ("i1", "i8", "arith.extsi"),
    ("i8", "i1", "arith.trunci"), ("i16", "f32", "arith.uitofp"), ("i8", "f16", "arith.sitofp"),
    ("f32", "i8", "arith.fptosi"), ("f32", "i16", "arith.fptoui"), ("f16", "i32", "arith.fptosi"),
    ("f32", "bf16", "arith.truncf"), ("bf16", "f32", "arith.extf"),
    ("f16", "f8E5M2", "arith.truncf"), ("i16", "bf16", "arith.bitcast"),
    ("i32", "index", "arith.index_cast"), ("index", "i16", "arith.index_cast"),
    ("i16", "index", "arith.index_castui")])
def test_conversions_between_widths(vulkan, rng, src, dst, op):
    n = 301
    if scalar_type(src).is_int:
        width = scalar_type(src).bits
        x = rng.integers(-(1 << (width - 1)), 1 << (width - 1), n) if width > 1 else \
            rng.integers(0, 2, n).astype(bool)
    else:
        x = rng.uniform(-300, 300, n) * rng.choice([1e-3, 1, 1e3], n)
        x = decode(src, encode(src, x)) if src in FORMATS else x.astype(np.float32)
    kernel = unary(f"convert_{src}_{dst}", src, dst, n, op)
    got = vulkan.run(kernel, [x])[0]
    expected = run_reference(kernel, [x])[0]
    if dst in FORMATS or dst == "f32":
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
        np.testing.assert_allclose(got, expected, rtol=0, atol=0, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)


def test_i1_tensors_are_bytes(vulkan, rng):
    n = 203
    kernel = binary("lt_mask", "f32", "i1", n, "arith.cmpf", predicate="olt")
    a, b = rng.standard_normal(n), rng.standard_normal(n)
    got = vulkan.run(kernel, [a, b])[0]
    np.testing.assert_array_equal(got, a.astype(np.float32) < b.astype(np.float32))


def test_bit_counting_on_narrow_types(vulkan, rng):
    n = 100
    x = rng.integers(-(1 << 15), 1 << 15, n)
    x[:3] = [0, -1, 1]
    for op in ("math.ctlz", "math.cttz", "math.ctpop"):
        kernel = unary(op[5:], "i16", "i16", n, op)
        np.testing.assert_array_equal(vulkan.run(kernel, [x])[0],
                                      run_reference(kernel, [x])[0])


@pytest.mark.parametrize("op", ["arith.addi", "arith.muli", "arith.divsi", "arith.remui",
                                "arith.shli", "arith.shrsi", "arith.maxui", "arith.xori"])
def test_i64_on_lavapipe(rng, op):
    from .conftest import _runner
    runner = _runner("llvmpipe")
    n = 200
    a = rng.integers(-(1 << 62), 1 << 62, n) * rng.choice([1, 2], n)
    b = rng.integers(-(1 << 40), 1 << 40, n)
    if "sh" in op:
        b = rng.integers(0, 70, n)
    kernel = binary(f"{op[6:]}_i64", "i64", "i64", n, op)
    assert kernel and runner.compile(kernel).requirements.get("int64")
    got = runner.run(kernel, [a, b])[0]
    np.testing.assert_array_equal(got, run_reference(kernel, [a, b])[0])


def test_f64_on_lavapipe_is_exact(rng):
    from .conftest import _runner
    runner = _runner("llvmpipe")
    n = 200
    ops = [Op("arith.mulf", (0, 1), "f64"), Op("arith.addf", (3, 0), "f64"),
           Op("math.sqrt", (4,), "f64"), Op("arith.fptosi", (5,), "i64"),
           Op("arith.sitofp", (6,), "f64"), Op("arith.subf", (5, 7), "f64")]
    kernel = Kernel("f64_chain", (n,), [Operand(0, "f64", (n,), identity(1)),
                                        Operand(1, "f64", (n,), identity(1))],
                    [Operand(2, "f64", (n,), identity(1))], ops, [8])
    a, b = rng.uniform(1, 1e6, n), rng.uniform(1, 1e6, n)
    got = runner.run(kernel, [a, b])[0]
    np.testing.assert_allclose(got, run_reference(kernel, [a, b])[0], rtol=1e-15)


def test_f64_without_the_feature_is_refused():
    from irtk.compiler.codegen.spirv import compile_kernel
    kernel = binary("add64f", "f64", "f64", 8, "arith.addf")
    with pytest.raises(CompileError, match=r"f64.*shaderFloat64.*'swiftshader'"):
        compile_kernel(kernel, VULKAN_PROFILES["swiftshader"])


def _without_int64(runner):
    import dataclasses
    return dataclasses.replace(runner.profile, name=f"{runner.profile.name}-no-int64",
                               int64=False)


_I64_EDGES = [0, 1, -1, 2, -2, (1 << 31) - 1, -(1 << 31), 1 << 31, (1 << 32) - 1, 1 << 32,
              (1 << 63) - 1, -(1 << 63), 0xFFFFFFFF00000000 - (1 << 64)]


def _i64_values(rng, n: int, small: bool = False) -> np.ndarray:
    if small:
        return rng.integers(0, 70, n)
    values = rng.integers(-(1 << 63), (1 << 63) - 1, n, dtype=np.int64, endpoint=True)
    values[:len(_I64_EDGES)] = _I64_EDGES
    return rng.permutation(values)


@pytest.mark.parametrize("op, fields", [
    ("arith.addi", {}), ("arith.subi", {}), ("arith.muli", {}), ("arith.andi", {}),
    ("arith.ori", {}), ("arith.xori", {}), ("arith.shli", {}), ("arith.shrui", {}),
    ("arith.shrsi", {}), ("arith.maxsi", {}), ("arith.minsi", {}), ("arith.maxui", {}),
    ("arith.minui", {}), *[("arith.cmpi", {"predicate": p})
                           for p in ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule",
                                     "ugt", "uge")]])
def test_emulated_i64_ops(vulkan, rng, op, fields):
    from irtk.compiler.codegen.spirv import compile_kernel
    n = 300
    out = "i1" if op == "arith.cmpi" else "i64"
    kernel = binary(f"{op[6:]}_i64e", "i64", out, n, op, **fields)
    compiled = compile_kernel(kernel, _without_int64(vulkan))
    assert "int64" not in compiled.requirements
    a = _i64_values(rng, n)
    b = _i64_values(rng, n, small="sh" in op)
    if op == "arith.cmpi":
        b[::3] = a[::3]   # equal operands too
    got = vulkan.run(kernel, [a, b], compiled)[0]
    np.testing.assert_array_equal(got, run_reference(kernel, [a, b])[0])


@pytest.mark.parametrize("src, dst, op", [
    ("i32", "i64", "arith.extsi"), ("i16", "i64", "arith.extui"), ("i1", "i64", "arith.extsi"),
    ("i64", "i8", "arith.trunci"), ("i64", "i32", "arith.trunci"), ("i64", "i1", "arith.trunci"),
    ("i64", "f32", "arith.sitofp"), ("i64", "f32", "arith.uitofp"),
    ("f32", "i64", "arith.fptosi"), ("f32", "i64", "arith.fptoui"), ("i64", "i64", "math.absi"),
    ("index", "i64", "arith.index_cast"), ("i64", "index", "arith.index_cast")])
def test_emulated_i64_conversions(vulkan, rng, src, dst, op):
    from irtk.compiler.codegen.spirv import compile_kernel
    n = 300
    if src == "f32":
        x = (rng.standard_normal(n) * 10.0 ** rng.integers(0, 21, n)).astype(np.float32)
        x[:4] = [np.nan, np.inf, -np.inf, 2.0 ** 63]
        x = x.astype(np.float64)
    elif src == "i64":
        x = _i64_values(rng, n)
        if dst == "f32":
            x[n // 2:] = rng.integers(-(1 << 24), 1 << 24, n - n // 2)  # exact range too
    elif src == "i1":
        x = rng.integers(0, 2, n).astype(bool)
    else:
        width = scalar_type(src).bits
        x = rng.integers(-(1 << (width - 1)), 1 << (width - 1), n)
    kernel = unary(f"convert_{src}_{dst}_e", src, dst, n, op)
    got = vulkan.run(kernel, [x], compile_kernel(kernel, _without_int64(vulkan)))[0]
    expected = run_reference(kernel, [x])[0]
    if dst == "f32":   # two roundings beyond 2^24: within one f32 ulp
        np.testing.assert_allclose(got, expected.astype(np.float32), rtol=1.2e-7, atol=0)
        exact = (np.abs(x) < (1 << 24)) & ((x >= 0) | (op == "arith.sitofp"))
        np.testing.assert_array_equal(got[exact], expected[exact].astype(np.float32))
    else:
        np.testing.assert_array_equal(got, expected)


def test_emulated_i64_reduction_and_division_refusal(vulkan, rng):
    """A sum of i64 values in the general strategy; an op no i64 form exists for is refused."""
    from irtk.compiler.codegen.spirv import compile_kernel
    rows, cols = 4, 50
    kernel = Kernel("sum_i64", (rows, cols), [Operand(0, "i64", (rows, cols), identity(2))],
                    [Operand(1, "i64", (rows,), AffineMap(2, ((1, 0, 0),)))],
                    [Op("arith.addi", (1, 0), "i64")], [2], ("parallel", "reduction"))
    x = rng.integers(-(1 << 60), 1 << 60, (rows, cols))
    init = rng.integers(-(1 << 62), 1 << 62, rows)
    got = vulkan.run(kernel, [x], compile_kernel(kernel, _without_int64(vulkan)),
                     initial=[init])[0]
    np.testing.assert_array_equal(got, run_reference(kernel, [x], [init])[0])
    with pytest.raises(CompileError, match=r"math.ipowi' on \(i64, i64\) -> i64 is not supported"):
        compile_kernel(binary("ipow64", "i64", "i64", 8, "math.ipowi"),
                       VULKAN_PROFILES["default"])


_I64_DIVISIONS = ["arith.divsi", "arith.divui", "arith.remsi", "arith.remui",
                  "arith.ceildivsi", "arith.ceildivui", "arith.floordivsi"]


@pytest.mark.parametrize("native", [False, True])
def test_i64_division_and_bit_counts(vulkan, rng, native):
    """Division was refused without shaderInt64 (and ceildiv/floordiv/bit counts even with
    it): emulated with 32-bit words, edge values, zero divisors and INT64_MIN / -1 included."""
    from irtk.compiler.codegen.spirv import compile_kernel
    profile = vulkan.profile if native else _without_int64(vulkan)
    if native and not profile.int64:
        pytest.skip(f"{profile.name} has no int64")
    n = 200
    a = _i64_values(rng, n)
    b = np.concatenate([_i64_values(rng, n // 2),
                        rng.integers(-(1 << 20), 1 << 20, n - n // 2)])
    b[:3], a[:3] = [0, -1, 7], [5, -(1 << 63), -(1 << 63)]
    for op in _I64_DIVISIONS:
        kernel = binary(f"{op[6:]}_i64d", "i64", "i64", n, op)
        compiled = compile_kernel(kernel, profile)
        assert bool(compiled.requirements.get("int64")) == native
        got = vulkan.run(kernel, [a, b], compiled)[0]
        want = run_reference(kernel, [a, b])[0]
        safe = b != 0                       # division by zero is undefined in MLIR
        np.testing.assert_array_equal(got[safe], want[safe], err_msg=op)
        np.testing.assert_array_equal(got[~safe], 0, err_msg=op)
    for op in ("math.ctlz", "math.cttz", "math.ctpop"):
        kernel = unary(f"{op[5:]}_i64d", "i64", "i64", n, op)
        got = vulkan.run(kernel, [a], compile_kernel(kernel, profile))[0]
        np.testing.assert_array_equal(got, run_reference(kernel, [a])[0], err_msg=op)
