"""Measure the math ops' error in ULP on a device, against a float64 reference.

Shared by tests/e2e/test_math_accuracy.py (which holds every device to the contract) and
bench/math_accuracy.py (which prints the table in docs/codegen_spirv.md). Each op is applied
elementwise to inputs of the type under test (f32, f16, bf16: the program takes f32 and
truncates, so f16/bf16 inputs are exact) from named ranges: tiny, subnormal, normal (the op's
domain), huge and special (+-0, +-inf, NaN), with fresh seeded random values.

The error of one result is |actual - exact| / ulp(exact) in the result type, where exact is
the float64 reference. Allowed: a subnormal result flushed to 0, and a subnormal input read as
0 (the smaller of both errors counts). Special inputs must give the reference's value exactly,
NaN for NaN and the sign of zero included (reported as 0 or inf ULP).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

import irtk
from irtk.hal.numerics import round_to

CONTRACT_ULP = 4.0
FLOAT_TYPES = ("f32", "f16", "bf16", "f64")
RANGES = ("tiny", "subnormal", "normal", "huge", "special")
# (mantissa bits, minimum normal exponent, maximum finite value)
_FORMATS = {"f32": (23, -126, float(np.finfo(np.float32).max)),
            "f16": (10, -14, 65504.0),
            "bf16": (7, -126, float.fromhex("0x1.fep127")),
            "f64": (52, -1022, float(np.finfo(np.float64).max))}

Sampler = Callable[[np.random.Generator, int, str], np.ndarray]


def _log_uniform(lo: float, hi: float, signed: bool = True) -> Sampler:
    def sample(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
        top = min(hi, _FORMATS[kind][2])
        x = np.exp(rng.uniform(math.log(lo), math.log(top), n))
        return x * rng.choice([-1.0, 1.0], n) if signed else x
    return sample


def _uniform(lo: float, hi: float) -> Sampler:
    def sample(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
        m = _FORMATS[kind][2]
        return rng.uniform(max(lo, -m), min(hi, m), n)
    return sample


def _mix(*samplers: Sampler) -> Sampler:
    def sample(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
        parts = [s(rng, n // len(samplers) + 1, kind) for s in samplers]
        return np.concatenate(parts)[:n]
    return sample


def _subnormal(signed: bool = True) -> Sampler:
    def sample(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
        mant, emin, _ = _FORMATS[kind]
        x = rng.integers(1, 1 << mant, n) * 2.0 ** (emin - mant)
        return x * rng.choice([-1.0, 1.0], n) if signed else x
    return sample


_erf = np.vectorize(math.erf, otypes=[np.float64])


@dataclass(frozen=True)
class MathOp:
    """An op, its float64 reference and where it is measured (`normal`: its domain)."""

    name: str
    reference: Callable[..., np.ndarray]
    normal: Sampler
    signed: bool = True               # tiny/subnormal/huge inputs of both signs
    huge: Sampler = field(default_factory=lambda: _log_uniform(1e4, 3.4e38))
    others: tuple[Sampler, ...] = ()  # the further operands (pow, atan2, fma)
    # Rewrites the normal inputs (fma: c cancelling a * b)
    adjust: Callable[[list[np.ndarray], str], list[np.ndarray]] | None = None
    label: str = ""                   # the name in OPS where one op is measured twice

    @property
    def key(self) -> str:
        return self.label or self.name

    def inputs(self, rng: np.random.Generator, kind: str, n: int) -> dict[str, list[np.ndarray]]:
        tiny = _log_uniform(1e-30, 1e-7, self.signed)
        sub = _subnormal(self.signed)
        huge = self.huge if self.signed else _log_uniform(1e4, 3.4e38, False)
        sets: dict[str, list[np.ndarray]] = {
            "tiny": [tiny(rng, n // 4, kind)], "subnormal": [sub(rng, n // 4, kind)],
            "normal": [self.normal(rng, n, kind)], "huge": [huge(rng, n // 4, kind)],
            "special": [np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1.0, 3.0,
                                  -0.5])]}
        for name, (x,) in list(sets.items()):
            if name == "special":   # every combination of special values
                xs = [v.ravel() for v in np.meshgrid(*[x] * self.arity, indexing="ij")]
            else:
                xs = [x] + [sample(rng, len(x), kind) for sample in self.others]
            xs = [round_to(kind, v.astype(np.float64)).astype(np.float64) for v in xs]
            if name == "normal" and self.adjust is not None:
                xs = [round_to(kind, v).astype(np.float64) for v in self.adjust(xs, kind)]
            sets[name] = xs
        return sets

    @property
    def arity(self) -> int:
        return 1 + len(self.others)


def _pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.power(x, y)


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a * b + c exactly (in fractions) and rounded once to float64; non-finite as numpy."""
    plain = a * b + c
    exact = [float(Fraction(x) * Fraction(y) + Fraction(z)) if math.isfinite(p) else p
             for x, y, z, p in zip(a.tolist(), b.tolist(), c.tolist(), plain.tolist())]
    return np.array(exact, dtype=np.float64)


def _cancel(xs: list[np.ndarray], kind: str) -> list[np.ndarray]:
    """Every other c is -(a * b rounded to the type): the result is a * b's rounding error."""
    a, b, c = xs
    c = c.copy()
    c[::2] = -round_to(kind, a[::2] * b[::2])
    return [a, b, c]


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(x)


def _near_quarter_turns(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    """Multiples of pi/2 rounded to the type: where argument reduction cancels most."""
    k = rng.integers(1, 1 << 20 if kind == "f32" else 1 << 8, n)
    return round_to(kind, k * (math.pi / 2)).astype(np.float64) * rng.choice([-1.0, 1.0], n)


def _near_one(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    return 1.0 + rng.uniform(-0.01, 0.01, n)


def _binades(rng: np.random.Generator, n: int, kind: str) -> np.ndarray:
    return np.exp2(rng.integers(-60, 60, n) + rng.uniform(0.0, 1.0, n))


_TRIG = _mix(_uniform(-100.0, 100.0), _near_quarter_turns)

OPS: dict[str, MathOp] = {op.key: op for op in (
    MathOp("exp", np.exp, _uniform(-104.0, 89.0)),
    MathOp("exp2", np.exp2, _uniform(-151.0, 129.0)),
    MathOp("expm1", np.expm1, _mix(_uniform(-30.0, 89.0), _uniform(-1.0, 1.0))),
    MathOp("log", np.log, _mix(_log_uniform(1e-37, 3e38, False), _uniform(0.5, 2.0))),
    MathOp("log2", np.log2, _mix(_log_uniform(1e-37, 3e38, False), _uniform(0.5, 2.0))),
    MathOp("log10", np.log10, _mix(_log_uniform(1e-37, 3e38, False), _uniform(0.5, 2.0))),
    MathOp("log1p", np.log1p, _mix(_uniform(-1.0, 1.0), _log_uniform(1e-7, 3e38, False))),
    MathOp("sqrt", np.sqrt, _log_uniform(1e-37, 3e38, False)),
    MathOp("rsqrt", _rsqrt, _log_uniform(1e-37, 3e38, False)),
    MathOp("tanh", np.tanh, _uniform(-12.0, 12.0)),
    MathOp("erf", _erf, _uniform(-5.0, 5.0)),
    MathOp("sin", np.sin, _TRIG),
    MathOp("cos", np.cos, _TRIG),
    MathOp("tan", np.tan, _TRIG),
    MathOp("atan", np.arctan, _mix(_uniform(-4.0, 4.0), _log_uniform(1e-3, 1e6))),
    MathOp("atan2", np.arctan2, _mix(_uniform(-4.0, 4.0), _log_uniform(1e-3, 1e6)),
           others=(_mix(_uniform(-4.0, 4.0), _log_uniform(1e-3, 1e6)),)),
    MathOp("fma", _fma, _uniform(-10.0, 10.0), others=(_uniform(-10.0, 10.0),
                                                        _uniform(-100.0, 100.0)),
           adjust=_cancel),
    MathOp("arith.divf", np.divide, _log_uniform(1e-30, 1e30),
           others=(_log_uniform(1e-30, 1e30),), label="divf"),
    MathOp("powf", _pow, _log_uniform(1e-3, 1e3, False), others=(_uniform(-12.0, 12.0),)),
    # large exponents near 1, and results across the whole range up to overflow
    MathOp("powf", _pow, _near_one, others=(_uniform(-8000.0, 8000.0),),
           label="powf (x near 1)"),
    MathOp("powf", _pow, _binades, others=(_uniform(-2.2, 2.2),),
           label="powf (wide)"),
)}


# What the "normal" range of each op holds (for the published table).
DOMAINS = {
    "exp": "[-104, 89]", "exp2": "[-151, 129]", "expm1": "[-30, 89], [-1, 1]",
    "log": "[1e-37, 3e38] log-uniform, [0.5, 2]", "log2": "as log", "log10": "as log",
    "log1p": "[-1, 1], [1e-7, 3e38]", "sqrt": "[1e-37, 3e38]", "rsqrt": "[1e-37, 3e38]",
    "tanh": "[-12, 12]", "erf": "[-5, 5]", "sin": "[-100, 100], k pi/2 (k < 2^20)",
    "cos": "as sin", "tan": "as sin", "atan": "[-4, 4], +-[1e-3, 1e6]",
    "atan2": "y, x in [-4, 4], +-[1e-3, 1e6]", "powf": "x [1e-3, 1e3], y [-12, 12]",
    "powf (x near 1)": "x 1 +- 0.01, y [-8000, 8000]",
    "powf (wide)": "x 2^[-60, 60], y [-2.2, 2.2]",
    "fma": "a, b [-10, 10], c [-100, 100] or -(a b)",
    "divf": "+-[1e-30, 1e30] both",
}


def program(op: MathOp, kind: str, n: int) -> str:
    """`main(x: f32[n], ...) -> f32[n]` applying `op` on `kind` values elementwise (f64:
    f64 in and out)."""
    io = "f64" if kind == "f64" else "f32"
    t = f"tensor<{n}x{io}>"
    names = ["a", "b", "c"][: op.arity]
    idmap = "affine_map<(d0) -> (d0)>"
    lines = []
    operands = []
    for nm in names:
        if kind in ("f32", "f64"):
            operands.append(f"%{nm}")
        else:
            lines.append(f"    %{nm}t = arith.truncf %{nm} : f32 to {kind}")
            operands.append(f"%{nm}t")
    full = op.name if "." in op.name else f"math.{op.name}"   # arith.divf and the like
    lines.append(f"    %m = {full} {', '.join(operands)} : {kind}")
    if kind in ("f32", "f64"):
        lines[-1] = lines[-1].replace("%m = ", "%r = ")
    else:
        lines.append(f"    %r = arith.extf %m : {kind} to f32")
    body = "\n".join(lines)
    params = ", ".join(f"%{nm}_in: {t}" for nm in names)
    ins = ", ".join(f"%{nm}_in" for nm in names)
    bargs = ", ".join(f"%{nm}: {io}" for nm in names)
    return f"""func.func @main({params}) -> {t} {{
  %init = tensor.empty() : {t}
  %res = linalg.generic {{indexing_maps = [{", ".join([idmap] * (op.arity + 1))}],
                         iterator_types = ["parallel"]}}
      ins({ins} : {", ".join([t] * op.arity)}) outs(%init : {t}) {{
  ^bb0({bargs}, %out: {io}):
{body}
    linalg.yield %r : {io}
  }} -> {t}
  return %res : {t}
}}
"""


def _ulp(kind: str, y: np.ndarray) -> np.ndarray:
    mant, emin, _ = _FORMATS[kind]
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.abs(y)))
    return 2.0 ** (np.maximum(e, emin) - mant)


def ulp_errors(kind: str, actual: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """Per-element error in ULP of `kind` (inf where a special value is wrong)."""
    mant, emin, vmax = _FORMATS[kind]
    a = actual.astype(np.float64)
    overflow = vmax + _ulp(kind, np.array(vmax)) / 2
    with np.errstate(invalid="ignore", over="ignore"):
        r = np.where(np.abs(exact) >= overflow, np.copysign(np.inf, exact), exact)
        err = np.abs(a - r) / _ulp(kind, r)
        special = ~np.isfinite(r) | ~np.isfinite(a)
        same = (np.isnan(a) & np.isnan(r)) | (a == r)
        err = np.where(special, np.where(same, 0.0, np.inf), err)
        zero = (r == 0) | (a == 0)
        signs = np.signbit(a) == np.signbit(r)
        err = np.where(zero & (a == r) & ~signs, np.inf, err)   # the sign of an exact zero
        flushed = (np.abs(r) < 2.0 ** emin) & (a == 0)
    return np.where(flushed, 0.0, err)


def measure(op: MathOp, kind: str, device: str, seed: int, n: int = 2048,
            compiled: dict[tuple[str, str, int], bytes] | None = None,
            target: str = "vulkan-spirv,cpu", vulkan_target: str = "default"
            ) -> dict[str, float]:
    """Max ULP error of `op` on `kind` per input range on `device` (irtk.Error where the
    target or device does not have the op on that type)."""
    rng = np.random.default_rng(seed)
    result: dict[str, float] = {}
    for name, xs in op.inputs(rng, kind, n).items():
        count = len(xs[0])
        key = (f"{op.key}@{target}:{vulkan_target}", kind, count)
        cache = compiled if compiled is not None else {}
        if key not in cache:
            # f64 is measured as f64 (compiling demotes it to f32 by default).
            cache[key] = irtk.compile_str(program(op, kind, count), target=target,
                                          vulkan_target=vulkan_target, demote_f64=False)
        module = irtk.load(cache[key], device=device)
        io = np.float64 if kind == "f64" else np.float32
        actual = np.asarray(module.main(*[x.astype(io) for x in xs]))
        with np.errstate(all="ignore"):
            exact = op.reference(*xs)
            err = ulp_errors(kind, actual, exact)
            if name == "subnormal":     # an input read as 0 is allowed
                zeroed = [np.where(np.abs(x) < 2.0 ** _FORMATS[kind][1], 0.0 * x, x) for x in xs]
                err = np.minimum(err, ulp_errors(kind, actual, op.reference(*zeroed)))
        result[name] = float(np.max(err))
        if name != "special" or result[name] > 0:
            worst = int(np.argmax(err))
            result[f"{name}_worst"] = float(xs[0][worst])
    return result
