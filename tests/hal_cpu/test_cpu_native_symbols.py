"""Native code never calls a function the process lacks: every external symbol of an object file
is resolved before it loads (a miss is an error, not a call to address 0)."""
from __future__ import annotations

import ctypes

import pytest

from hal_cpu import llvm_jit


def _object(body: str) -> bytes:
    return llvm_jit.compile_object(body)


def test_the_c_math_library_resolves_and_a_missing_function_is_an_error():
    obj = _object("declare double @erf(double) nounwind\n"
                  "define double @f(double %x) {\n"
                  "  %r = call double @erf(double %x)\n  ret double %r\n}\n")
    assert llvm_jit.undefined_symbols(obj) == ["erf"]
    llvm_jit.LoadedCode(obj).entry("f")
    missing = _object("declare double @irtk_no_such_function(double) nounwind\n"
                      "define double @g(double %x) {\n"
                      "  %r = call double @irtk_no_such_function(double %x)\n"
                      "  ret double %r\n}\n")
    with pytest.raises(llvm_jit.UnresolvedSymbol, match="irtk_no_such_function"):
        llvm_jit.LoadedCode(missing)


def test_a_conversion_llvm_lowers_to_a_runtime_library_call_is_caught():
    # f64 -> f16 without AVX512-FP16 is `__truncdfhf2`, which only GCC 12's libgcc has (the
    # native code generator rounds through f32 to odd instead, see native_ops.narrow).
    obj = _object("define half @h(double %x) {\n"
                  "  %r = fptrunc double %x to half\n  ret half %r\n}\n")
    names = llvm_jit.undefined_symbols(obj)
    if not names:
        pytest.skip("this CPU converts f64 to f16 in hardware")
    if hasattr(ctypes.CDLL(None), names[0]):
        pytest.skip("this process has libgcc's conversions in its global scope")
    with pytest.raises(llvm_jit.UnresolvedSymbol, match="__truncdfhf2"):
        llvm_jit.LoadedCode(obj)


def test_a_non_elf_object_lists_nothing():
    assert llvm_jit.undefined_symbols(b"not an object file") == []
