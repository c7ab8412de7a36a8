"""The native executor against the numpy reference, op by op and strategy by strategy.

Every body op, on every signature the native backend claims, runs as a one-op kernel over fresh
random values mixed with the special ones (zeros of both signs, infinities, NaN, subnormals,
integer extremes) on both executors; results must be identical bit for bit (NaN: any NaN),
except the C library's transcendental functions, which must be within 4 ULP of numpy's
(docs/cpu_kernels.md, "The native executor"). Whole programs cover the strategies: points
innermost (matmul, convolution, a computed sum), reduction innermost (row sums, max), dynamic
shapes, gathers and several outputs.
"""
from __future__ import annotations

import numpy as np
import pytest

from hal_cpu.native_ops import NATIVE
from hal_cpu.ops import OpAttrs
from irtk import body_ops
from irtk.hal import numerics
from irtk.types import SCALAR_TYPES
from tests.hal_cpu.cpu_kernel_builder import elementwise, op, run, workgroups_for

N = 203   # not a multiple of any vector width: the loops' scalar tails run too
# Ops computed by the C library (or numpy's own SIMD code on the reference): a few ULP apart.
TRANSCENDENTAL = {"math.exp", "math.exp2", "math.expm1", "math.log", "math.log2", "math.log10",
                  "math.log1p", "math.tanh", "math.sin", "math.cos", "math.tan", "math.atan",
                  "math.erf", "math.powf", "math.atan2", "math.fpowi"}
MAX_ULP = 4


def _signatures() -> list[tuple[str, tuple[str, ...], str, str | None]]:
    out = []
    for name in sorted(body_ops.OPS):
        if name in body_ops.EXECUTOR_OPS or name == "arith.constant":
            continue
        predicates: tuple[str | None, ...] = (None,)
        if name == "arith.cmpf":
            predicates = body_ops.FLOAT_PREDICATES
        elif name == "arith.cmpi":
            predicates = body_ops.INT_PREDICATES
        for operands, result in body_ops.signatures(name):
            if NATIVE.supports(name, operands, result):
                for p in predicates:
                    out.append((name, operands, result, p))
    return out


SIGNATURES = _signatures()


def _values(t: str, rng: np.random.Generator, n: int) -> np.ndarray:
    st = SCALAR_TYPES[t]
    if st.is_float:
        specials = np.array([0.0, -0.0, 1.0, -1.0, 0.5, np.inf, -np.inf, np.nan, 1e-40, -3e-39,
                             1e-7, 65504.0, 3e38, -1e30, 88.0, -104.0, 2.0 ** -24])
        scale = 10.0 ** rng.integers(-8, 9, n)
        x = rng.standard_normal(n) * scale
        x[:specials.size] = specials
        return numerics.round_to(t, x.astype(np.float64))
    bits = st.bits
    lo, hi = (-1, 0) if t == "i1" else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    small = rng.integers(-3, bits + 3, n)
    wide = rng.integers(lo, hi, n, endpoint=True, dtype=np.int64)
    x = np.where(rng.random(n) < 0.5, small, wide)
    x[:6] = [0, 1, -1, lo, hi, bits]
    if t == "i1":
        return (x & 1).astype(bool)
    return numerics.wrap_int(t, x.astype(np.int64)).astype(st.compute_dtype)


def _ulps(t: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units of the type's last place (on the ordered integer line)."""
    w = SCALAR_TYPES[t].bits
    ordered = []
    for x in (a, b):
        bits = numerics.to_bits(t, x).astype(np.uint64)
        magnitude = (bits & np.uint64((1 << (w - 1)) - 1)).astype(np.float64)
        ordered.append(np.where(bits >> np.uint64(w - 1), -magnitude, magnitude))
    return np.abs(ordered[0] - ordered[1])


def _compare(name: str, t: str, native: np.ndarray, ref: np.ndarray, where: str) -> None:
    if not SCALAR_TYPES[t].is_float:
        np.testing.assert_array_equal(native, ref, err_msg=where)
        return
    nan_n, nan_r = np.isnan(native.astype(np.float64)), np.isnan(ref.astype(np.float64))
    assert np.array_equal(nan_n, nan_r), f"{where}: NaN at different points"
    keep = ~nan_n
    if name in TRANSCENDENTAL:
        far = _ulps(t, native[keep], ref[keep])
        assert far.max(initial=0) <= MAX_ULP, \
            f"{where}: {far.max()} ULP apart at {native[keep][far.argmax()]} vs " \
            f"{ref[keep][far.argmax()]}"
    else:
        same = numerics.to_bits(t, native[keep]) == numerics.to_bits(t, ref[keep])
        assert same.all(), f"{where}: native {native[keep][~same][:4]} reference " \
                           f"{ref[keep][~same][:4]}"


def _on_both(device, monkeypatch, data, inputs, outputs, input_types):
    results = {}
    for mode in ("native", "reference"):
        monkeypatch.setenv("IRTK_CPU_EXECUTOR", mode)
        results[mode] = run(device, data, inputs, outputs, workgroups_for(N, 64),
                            input_types=input_types)
    return results["native"], results["reference"]


@pytest.mark.parametrize("name, operands, result, predicate", SIGNATURES,
                         ids=[f"{n}-{','.join(o)}-{r}-{p or ''}" for n, o, r, p in SIGNATURES])
def test_every_native_op_matches_the_reference(device, rng, monkeypatch, name, operands, result,
                                               predicate):
    inputs = [_values(t, rng, N) for t in operands]
    if name == "math.fpowi":
        inputs[1] = (inputs[1] % 9 - 4).astype(inputs[1].dtype)
    body = [op(name, *range(len(operands)), result_type=result, predicate=predicate)]
    data = elementwise("k", [N], list(operands), [result], body, [len(operands) + 1])
    (native,), (ref,) = _on_both(device, monkeypatch, data, inputs, [((N,), result)],
                                 list(operands))
    _compare(name, result, native, ref, f"{name}{operands} -> {result}")


def test_the_native_backend_claims_every_op_on_the_wide_types():
    """f32, f16, bf16, f64 and i1-i64 are native (the narrow floats and ints stay on numpy)."""
    for name in body_ops.NAMES - set(body_ops.EXECUTOR_OPS):
        for operands, result in body_ops.signatures(name):
            wide = all(t in ("f16", "bf16", "f32", "f64", "i1", "i8", "i16", "i32", "i64")
                       for t in (*operands, result))
            if wide:
                assert NATIVE.supports(name, operands, result), (name, operands, result)


def test_unclaimed_types_keep_the_numpy_plan(device, monkeypatch):
    monkeypatch.setenv("IRTK_CPU_EXECUTOR", "native")
    wide = elementwise("wide", [8], ["f32"], ["f32"], [op("math.exp", 0, result_type="f32")], [2])
    narrow = elementwise("narrow", [8], ["f8E4M3FN"], ["f8E4M3FN"],
                         [op("math.exp", 0, result_type="f8E4M3FN")], [2])
    assert device.create_executable("cpu-kernel-fb", wide).kernels[0].plan.name == "native"
    assert device.create_executable("cpu-kernel-fb", narrow).kernels[0].plan.name == \
        "elementwise"
    monkeypatch.setenv("IRTK_CPU_EXECUTOR", "reference")
    assert device.create_executable("cpu-kernel-fb", wide).kernels[0].plan.name == "elementwise"


def test_an_unknown_executor_is_a_device_error(device, monkeypatch):
    from irtk.errors import DeviceError
    monkeypatch.setenv("IRTK_CPU_EXECUTOR", "fast")
    data = elementwise("k", [8], ["f32"], ["f32"], [op("math.exp", 0, result_type="f32")], [2])
    with pytest.raises(DeviceError, match="IRTK_CPU_EXECUTOR is 'fast'"):
        device.create_executable("cpu-kernel-fb", data)


# --- whole programs: every strategy --------------------------------------------------------------

PROGRAMS = {
    "matmul_f32": ("""
func.func @main(%a: tensor<33x29xf32>, %b: tensor<29x47xf32>) -> tensor<33x47xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<33x47xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<33x47xf32>) -> tensor<33x47xf32>
  %r = linalg.matmul ins(%a, %b : tensor<33x29xf32>, tensor<29x47xf32>)
                     outs(%f : tensor<33x47xf32>) -> tensor<33x47xf32>
  return %r : tensor<33x47xf32>
}""", [((33, 29), np.float32), ((29, 47), np.float32)]),
    "matmul_f16": ("""
func.func @main(%a: tensor<17x40xf16>, %b: tensor<40x9xf16>) -> tensor<17x9xf16> {
  %z = arith.constant 0.0 : f16
  %e = tensor.empty() : tensor<17x9xf16>
  %f = linalg.fill ins(%z : f16) outs(%e : tensor<17x9xf16>) -> tensor<17x9xf16>
  %r = linalg.matmul ins(%a, %b : tensor<17x40xf16>, tensor<40x9xf16>)
                     outs(%f : tensor<17x9xf16>) -> tensor<17x9xf16>
  return %r : tensor<17x9xf16>
}""", [((17, 40), np.float16), ((40, 9), np.float16)]),
    "matmul_i8_i32": ("""
func.func @main(%a: tensor<13x70xi8>, %b: tensor<70x21xi8>) -> tensor<13x21xi32> {
  %z = arith.constant 0 : i32
  %e = tensor.empty() : tensor<13x21xi32>
  %f = linalg.fill ins(%z : i32) outs(%e : tensor<13x21xi32>) -> tensor<13x21xi32>
  %r = linalg.matmul ins(%a, %b : tensor<13x70xi8>, tensor<70x21xi8>)
                     outs(%f : tensor<13x21xi32>) -> tensor<13x21xi32>
  return %r : tensor<13x21xi32>
}""", [((13, 70), np.int8), ((70, 21), np.int8)]),
    "conv_relu": ("""
func.func @main(%x: tensor<1x12x12x5xf32>, %w: tensor<3x3x5x7xf32>) -> tensor<1x10x10x7xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x10x10x7xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x10x10x7xf32>) -> tensor<1x10x10x7xf32>
  %c = linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
       ins(%x, %w : tensor<1x12x12x5xf32>, tensor<3x3x5x7xf32>) outs(%f : tensor<1x10x10x7xf32>) -> tensor<1x10x10x7xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>],
       iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
       ins(%c : tensor<1x10x10x7xf32>) outs(%e : tensor<1x10x10x7xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.maximumf %v, %z : f32
    linalg.yield %m : f32
  } -> tensor<1x10x10x7xf32>
  return %r : tensor<1x10x10x7xf32>
}""", [((1, 12, 12, 5), np.float32), ((3, 3, 5, 7), np.float32)]),
    "softmax": ("""
func.func @main(%x: tensor<6x300xf32>) -> tensor<6x300xf32> {
  %e = tensor.empty() : tensor<6x300xf32>
  %r = linalg.softmax dimension(1) ins(%x : tensor<6x300xf32>) outs(%e : tensor<6x300xf32>) -> tensor<6x300xf32>
  return %r : tensor<6x300xf32>
}""", [((6, 300), np.float32)]),
    "row_sum_and_max": ("""
func.func @main(%x: tensor<9x1000xf32>) -> (tensor<9xf32>, tensor<9xf32>) {
  %z = arith.constant 0.0 : f32
  %n = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<9xf32>
  %s0 = linalg.fill ins(%z : f32) outs(%e : tensor<9xf32>) -> tensor<9xf32>
  %m0 = linalg.fill ins(%n : f32) outs(%e : tensor<9xf32>) -> tensor<9xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, k) -> (i, k)>, affine_map<(i, k) -> (i)>],
       iterator_types = ["parallel", "reduction"]} ins(%x : tensor<9x1000xf32>) outs(%s0 : tensor<9xf32>) {
  ^bb0(%v: f32, %a: f32):
    %t = arith.addf %a, %v : f32
    linalg.yield %t : f32
  } -> tensor<9xf32>
  %m = linalg.generic {indexing_maps = [affine_map<(i, k) -> (i, k)>, affine_map<(i, k) -> (i)>],
       iterator_types = ["parallel", "reduction"]} ins(%x : tensor<9x1000xf32>) outs(%m0 : tensor<9xf32>) {
  ^bb0(%v: f32, %a: f32):
    %t = arith.maximumf %a, %v : f32
    linalg.yield %t : f32
  } -> tensor<9xf32>
  return %s, %m : tensor<9xf32>, tensor<9xf32>
}""", [((9, 1000), np.float32)]),
    "column_sum_i64": ("""
func.func @main(%x: tensor<50x7xi64>) -> tensor<7xi64> {
  %z = arith.constant 0 : i64
  %e = tensor.empty() : tensor<7xi64>
  %s0 = linalg.fill ins(%z : i64) outs(%e : tensor<7xi64>) -> tensor<7xi64>
  %s = linalg.generic {indexing_maps = [affine_map<(k, j) -> (k, j)>, affine_map<(k, j) -> (j)>],
       iterator_types = ["reduction", "parallel"]} ins(%x : tensor<50x7xi64>) outs(%s0 : tensor<7xi64>) {
  ^bb0(%v: i64, %a: i64):
    %t = arith.addi %a, %v : i64
    linalg.yield %t : i64
  } -> tensor<7xi64>
  return %s : tensor<7xi64>
}""", [((50, 7), np.int64)]),
    "dynamic_add_and_gather": ("""
func.func @main(%a: tensor<?xf32>, %t: tensor<16xf32>, %i: tensor<?xi32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d) -> (d)>, affine_map<(d) -> (d)>, affine_map<(d) -> (d)>],
       iterator_types = ["parallel"]} ins(%a, %i : tensor<?xf32>, tensor<?xi32>) outs(%e : tensor<?xf32>) {
  ^bb0(%x: f32, %j: i32, %o: f32):
    %k = arith.index_cast %j : i32 to index
    %g = tensor.extract %t[%k] : tensor<16xf32>
    %s = arith.addf %x, %g : f32
    linalg.yield %s : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}""", [((301,), np.float32), ((16,), np.float32), ((301,), "index")]),
}


def _program_inputs(specs, rng):
    out = []
    for shape, dt in specs:
        if dt == "index":
            out.append(rng.integers(0, 16, shape).astype(np.int32))
        elif np.issubdtype(dt, np.integer):
            out.append(rng.integers(-100, 100, shape).astype(dt))
        else:
            out.append(rng.standard_normal(shape).astype(dt))
    return out


@pytest.mark.parametrize("driver", ["local-sync", "local-task"])
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_programs_match_the_reference_on_each_strategy(program, driver, rng, monkeypatch):
    import irtk
    text, specs = PROGRAMS[program]
    vmfb = irtk.compile_str(text, target="cpu")
    inputs = _program_inputs(specs, rng)
    results = {}
    for mode in ("native", "reference"):
        monkeypatch.setenv("IRTK_CPU_EXECUTOR", mode)
        module = irtk.load(vmfb, device=driver)
        out = module.main(*inputs)
        results[mode] = [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]
    for n, r in zip(results["native"], results["reference"]):
        if program in ("softmax",):   # exp: the C library's against numpy's
            np.testing.assert_allclose(n, r, rtol=4e-7 * 8, atol=1e-9)
        elif program == "row_sum_and_max":   # a reassociated sum: a different order
            np.testing.assert_allclose(n, r, rtol=1e-5, atol=1e-4)
        else:
            np.testing.assert_array_equal(n, r)
