"""Large and deep programs: the compiler compiles them or gives a located irtk.Error, never a
Python exception (docs/compiler.md, "Limits")."""
from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

import irtk
from irtk.compiler import fusion, regalloc
from irtk.errors import CompileError, Error, ParseError

LOCATED = re.compile(r"^\S+:\d+:\d+: error: ")


def scalar_chain(n: int, ty: str = "f32", op: str = "arith.addf") -> str:
    lines = [f"func.func @main(%a: {ty}) -> {ty} {{"]
    prev = "%a"
    for i in range(n):
        lines.append(f"  %v{i} = {op} {prev}, %a : {ty}")
        prev = f"%v{i}"
    return "\n".join(lines + [f"  return {prev} : {ty}", "}", ""])


def tensor_chain(n: int) -> str:
    ty = "tensor<4xf32>"
    lines = [f"func.func @main(%a: {ty}) -> {ty} {{"]
    prev = "%a"
    for i in range(n):
        lines.append(f"  %v{i} = arith.addf {prev}, %a : {ty}")
        prev = f"%v{i}"
    return "\n".join(lines + [f"  return {prev} : {ty}", "}", ""])


def wide_sum(n: int) -> str:
    """n values all live at once (each read again by a second sum), then summed. Each is
    2a, made by a different op (v_i = v_{i-1} + 0), so that none is a repeat of another."""
    lines = ["func.func @main(%a: f32) -> f32 {", "  %zero = arith.subf %a, %a : f32",
             "  %v0 = arith.addf %a, %a : f32"]
    for i in range(1, n):
        lines.append(f"  %v{i} = arith.addf %v{i - 1}, %zero : f32")
    prev = "%a"
    for i in range(n):
        lines.append(f"  %s{i} = arith.addf {prev}, %v{i} : f32")
        prev = f"%s{i}"
    return "\n".join(lines + [f"  return {prev} : f32", "}", ""])


def nested_ifs(depth: int) -> str:
    lines = ["func.func @main(%c: i1, %a: f32) -> f32 {"]
    for k in range(depth):
        lines.append("  " * (k + 1) + f"%x{k} = scf.if %c -> (f32) {{")
    lines += ["  " * (depth + 1) + "%y = arith.addf %a, %a : f32",
              "  " * (depth + 1) + "scf.yield %y : f32"]
    for k in reversed(range(depth)):
        ind = "  " * (k + 1)
        if k + 1 < depth:
            lines.append(ind + f"  scf.yield %x{k + 1} : f32")
        lines += [ind + "} else {", ind + "  scf.yield %a : f32", ind + "}"]
    return "\n".join(lines + ["  return %x0 : f32", "}", ""])


def nested_fors(depth: int) -> str:
    lines = ["func.func @main(%a: f32) -> f32 {", "  %c0 = arith.constant 0 : index",
             "  %c1 = arith.constant 1 : index", "  %c2 = arith.constant 2 : index"]
    prev = "%a"
    for k in range(depth):
        lines.append("  " * (k + 1) + f"%x{k} = scf.for %i{k} = %c0 to %c2 step %c1 "
                     f"iter_args(%s{k} = {prev}) -> (f32) {{")
        prev = f"%s{k}"
    lines += ["  " * (depth + 1) + f"%y = arith.addf {prev}, %a : f32",
              "  " * (depth + 1) + "scf.yield %y : f32"]
    for k in reversed(range(depth)):
        if k + 1 < depth:
            lines.append("  " * (k + 2) + f"scf.yield %x{k + 1} : f32")
        lines.append("  " * (k + 1) + "}")
    return "\n".join(lines + ["  return %x0 : f32", "}", ""])


def run_main(data: bytes, *args: object) -> object:
    return irtk.load(data, device="local-sync").main(*args)


def compile_error(src: str) -> str:
    """The message of the irtk.Error compiling `src` raises (located: file:line:col)."""
    with pytest.raises(Error) as info:
        irtk.compile_str(src, target="cpu", filename="big.mlir")
    assert isinstance(info.value, (ParseError, CompileError)), type(info.value)
    text = str(info.value)
    assert LOCATED.match(text), text
    return text


# -- registers ----------------------------------------------------------------------------------

def test_a_long_scalar_chain_reuses_registers():
    data = irtk.compile_str(scalar_chain(10_000), target="cpu")
    out = run_main(data, np.float32(1.0))
    assert float(np.asarray(out)) == 10_001.0


def test_a_long_index_chain_compiles():
    data = irtk.compile_str(scalar_chain(10_000, "index", "arith.addi"), target="cpu")
    out = run_main(data, 3)
    assert int(np.asarray(out)) == 3 * 10_001


def test_many_values_live_at_once_compile():
    # 9000 f32 values live together: more than a call may pass, fewer than a bank holds.
    data = irtk.compile_str(wide_sum(9_000), target="cpu")
    out = run_main(data, np.float32(0.5))
    assert float(np.asarray(out)) == 0.5 + 9_000.0


def test_more_live_values_than_registers_is_a_located_error(monkeypatch):
    monkeypatch.setattr(regalloc, "MAX_REGISTERS", 100)
    text = compile_error(wide_sum(200))
    assert "needs 201 f32 registers at once, more than the VM's 100" in text
    assert text.startswith("big.mlir:1:1: error: ")


@pytest.mark.slow
def test_a_function_of_100000_scalar_ops_compiles():
    data = irtk.compile_str(scalar_chain(100_000), target="cpu")
    out = run_main(data, np.float32(1.0))
    assert float(np.asarray(out)) == 100_001.0


# -- deep bodies --------------------------------------------------------------------------------

def test_a_long_elementwise_chain_compiles_in_several_dispatches():
    n = 2_000
    data = irtk.compile_str(tensor_chain(n), target="cpu")
    a = np.arange(4, dtype=np.float32)
    out = run_main(data, a)
    np.testing.assert_array_equal(np.asarray(out), a * (n + 1))


def test_fusion_stops_at_the_body_size_limit():
    text: list[str] = []
    irtk.compile_str(tensor_chain(3 * fusion.MAX_FUSED_OPS), target="cpu",
                     dump_after="dispatch", dump=text.append)
    dispatches = text[0].count("dispatch @")
    assert 3 <= dispatches <= 4, text[0][:2000]


@pytest.mark.slow
def test_20000_chained_tensor_ops_compile():
    n = 20_000
    data = irtk.compile_str(tensor_chain(n), target="cpu")
    a = np.ones(4, dtype=np.float32)
    out = run_main(data, a)
    np.testing.assert_array_equal(np.asarray(out), a * (n + 1))


@pytest.mark.parametrize("make", [nested_ifs, nested_fors], ids=["scf.if", "scf.for"])
def test_deep_nesting_is_a_located_error(make):
    assert "nesting too deep" in compile_error(make(500))


@pytest.mark.parametrize("make", [nested_ifs, nested_fors], ids=["scf.if", "scf.for"])
def test_nesting_the_parser_takes_compiles(make):
    irtk.compile_str(make(60), target="cpu")


# -- sizes --------------------------------------------------------------------------------------

@pytest.mark.parametrize("dim", ["99999999999999999999", str(2**63 - 1), "4611686018427387904"])
def test_a_tensor_too_large_for_i64_is_a_located_error(dim):
    t = f"tensor<{dim}xf32>"
    src = f"func.func @main(%a: {t}) -> {t} {{\n  return %a : {t}\n}}\n"
    assert "is too large" in compile_error(src)


def test_a_dense_constant_too_large_is_a_located_error():
    t = "tensor<1000000000xf32>"
    src = (f"func.func @main() -> {t} {{\n  %c = arith.constant dense<1.5> : {t}\n"
           f"  return %c : {t}\n}}\n")
    assert "larger than" in compile_error(src)


# -- exports ------------------------------------------------------------------------------------

def test_a_module_of_private_functions_says_to_make_one_public():
    src = ("func.func private @f(%a: f32) -> f32 {\n  %b = arith.addf %a, %a : f32\n"
           "  return %b : f32\n}\n")
    text = compile_error(src)
    assert text.startswith("big.mlir:1:1: error: module exports no function: @f is private")
    assert "drop 'private'" in text


@pytest.mark.parametrize("src", ["module {\n}\n", "func.func private @f(%a: f32) -> f32\n"],
                         ids=["empty", "declaration"])
def test_a_module_without_functions_says_what_to_define(src):
    assert "define a public func.func" in compile_error(src)


# -- the command line ---------------------------------------------------------------------------

@pytest.mark.parametrize("src, expected", [
    ("func.func private @f(%a: f32) -> f32 {\n  return %a : f32\n}\n", "drop 'private'"),
    ("module {\n}\n", "define a public func.func"),
    (nested_ifs(500), "nesting too deep"),
    (tensor_chain(1_000), None),
    (scalar_chain(10_000), None),
], ids=["private", "empty", "deep", "chain", "scalars"])
def test_cli_compile_gives_a_message_or_a_module(tmp_path, src, expected):
    path = tmp_path / "in.mlir"
    path.write_text(src)
    out = tmp_path / "out.vmfb"
    p = subprocess.run([sys.executable, "-m", "irtk.cli", "compile", str(path), "-o", str(out),
                        "--target", "cpu"], capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr
    if expected is None:
        assert p.returncode == 0, p.stderr
        assert out.stat().st_size > 0
    else:
        assert p.returncode == 1
        assert p.stderr.startswith(f"{path}:"), p.stderr
        assert expected in p.stderr
