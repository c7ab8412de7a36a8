"""The polynomial coefficients of the math sequences are what scripts/math_coefficients.py
fits (so the script stays the one way to change them), and each fit meets its target."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from irtk.compiler.codegen.spirv import math_f32, math_pow, math_trig

_SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "math_coefficients.py"
_spec = importlib.util.spec_from_file_location("math_coefficients", _SCRIPT)
assert _spec and _spec.loader
fits = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fits)


@pytest.mark.parametrize("name", sorted(fits.FITS))
def test_coefficients_are_the_scripts_fit(name: str) -> None:
    held = next(getattr(m, name) for m in (math_f32, math_trig, math_pow) if hasattr(m, name))
    coefficients, relative_error = fits.fit(*fits.FITS[name])
    assert tuple(float(c) for c in coefficients) == held
    assert relative_error < 1e-7
