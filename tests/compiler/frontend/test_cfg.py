"""Function bodies with cf.br / cf.cond_br / cf.switch: lifted to nested scf.if by the importer
(checked with the TIR evaluator), refused with a located error for loops, non-dominating uses
and bodies that would grow too large, and run end to end on local-task and a Vulkan device."""
from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import irtk
from irtk.compiler import tir
from irtk.compiler.frontend import cfg, parse_program
from tests.compiler.frontend.helpers import RNG, SEED, close, f32, run
from tests.conftest import target_for, vulkan_device_uris

ROOT = Path(__file__).resolve().parents[3]
CONFORMANCE = ROOT / "tests" / "conformance" / "iree_e2e" / "regression" / \
    "force_single_dispatch.mlir"

# A diamond: both arms pass a tensor and a scalar to the join block through its arguments.
DIAMOND = """
func.func @main(%x: tensor<4xf32>, %k: i32) -> tensor<4xf32> {
  %c0 = arith.constant 0 : i32
  %pos = arith.cmpi sgt, %k, %c0 : i32
  %e = tensor.empty() : tensor<4xf32>
  cf.cond_br %pos, ^bb1(%x : tensor<4xf32>), ^bb2
^bb1(%a: tensor<4xf32>):
  %d = linalg.add ins(%a, %a : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  cf.br ^bb3(%d, %k : tensor<4xf32>, i32)
^bb2:
  %n = linalg.negf ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %m = arith.muli %k, %k : i32
  cf.br ^bb3(%n, %m : tensor<4xf32>, i32)
^bb3(%r: tensor<4xf32>, %s: i32):
  %sf = arith.sitofp %s : i32 to f32
  %t = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]}
      ins(%r : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %p = arith.mulf %v, %sf : f32
    linalg.yield %p : f32
  } -> tensor<4xf32>
  return %t : tensor<4xf32>
}
"""

# Nested conditions, each leaf returning its own values.
NESTED = """
func.func @main(%x: tensor<3xf32>, %a: i32, %b: i32) -> (tensor<3xf32>, i32) {
  %c0 = arith.constant 0 : i32
  %e = tensor.empty() : tensor<3xf32>
  %apos = arith.cmpi sgt, %a, %c0 : i32
  cf.cond_br %apos, ^pos, ^nonpos
^pos:
  %bpos = arith.cmpi sgt, %b, %c0 : i32
  cf.cond_br %bpos, ^pp, ^pn
^pp:
  %s = linalg.add ins(%x, %x : tensor<3xf32>, tensor<3xf32>) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %one = arith.constant 1 : i32
  return %s, %one : tensor<3xf32>, i32
^pn:
  %m = linalg.mul ins(%x, %x : tensor<3xf32>, tensor<3xf32>) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %two = arith.constant 2 : i32
  return %m, %two : tensor<3xf32>, i32
^nonpos:
  %n = linalg.negf ins(%x : tensor<3xf32>) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %d = arith.subi %a, %b : i32
  return %n, %d : tensor<3xf32>, i32
}
"""

# ^join is reached from two paths that otherwise return on their own: it is copied into both.
JOIN = """
func.func @main(%x: tensor<5xf32>, %y: tensor<5xf32>, %c1: i1, %c2: i1, %c3: i1) -> tensor<5xf32> {
  %e = tensor.empty() : tensor<5xf32>
  cf.cond_br %c1, ^a, ^b
^a:
  cf.cond_br %c2, ^join(%x : tensor<5xf32>), ^ra
^b:
  %s = linalg.sub ins(%y, %x : tensor<5xf32>, tensor<5xf32>) outs(%e : tensor<5xf32>) -> tensor<5xf32>
  cf.cond_br %c3, ^join(%s : tensor<5xf32>), ^rb
^join(%v: tensor<5xf32>):
  %d = linalg.mul ins(%v, %y : tensor<5xf32>, tensor<5xf32>) outs(%e : tensor<5xf32>) -> tensor<5xf32>
  return %d : tensor<5xf32>
^ra:
  return %x : tensor<5xf32>
^rb:
  return %y : tensor<5xf32>
}
"""

SWITCH = """
func.func @main(%x: tensor<4xi32>, %flag: i32) -> tensor<4xi32> {
  %e = tensor.empty() : tensor<4xi32>
  cf.switch %flag : i32, [
    default: ^out(%x : tensor<4xi32>),
    1: ^double,
    7: ^square
  ]
^double:
  %d = linalg.add ins(%x, %x : tensor<4xi32>, tensor<4xi32>) outs(%e : tensor<4xi32>) -> tensor<4xi32>
  cf.br ^out(%d : tensor<4xi32>)
^square:
  %s = linalg.mul ins(%x, %x : tensor<4xi32>, tensor<4xi32>) outs(%e : tensor<4xi32>) -> tensor<4xi32>
  cf.br ^out(%s : tensor<4xi32>)
^out(%r: tensor<4xi32>):
  return %r : tensor<4xi32>
}
"""


def _diamond(x, k):
    return (2 * x) * k if k > 0 else (-x) * float(k * k)


def _nested(x, a, b):
    if a > 0:
        return (x + x, 1) if b > 0 else (x * x, 2)
    return -x, a - b


def _join(x, y, c1, c2, c3):
    if c1:
        return x * y if c2 else x
    return (y - x) * y if c3 else y


def _switch(x, flag):
    return {1: x + x, 7: x * x}.get(flag, x)


def kinds(region: tir.Region) -> list[str]:
    return [op.kind for op in tir.walk(region)]


def test_diamond_joins_after_one_scf_if_with_the_join_block_inlined_once():
    program = parse_program(DIAMOND, "diamond.mlir")
    assert not program.unsupported, program.unsupported
    body = program.function("main").body
    top = [op.kind for op in body.ops]
    assert top.count("scf.if") == 1 and top[-1] == "return"
    (if_op,) = [op for op in body.ops if op.kind == "scf.if"]
    assert [r.type for r in if_op.results] == [tir.TensorType((4,), "f32"), tir.ScalarType("i32")]
    # The join block's generic and sitofp come after the scf.if, not inside either branch.
    after = top[top.index("scf.if") + 1:]
    assert "arith.sitofp" in after and "generic" in after
    assert kinds(body).count("arith.sitofp") == 1


@pytest.mark.parametrize("k", [3, -2, 0])
def test_diamond_with_block_arguments_matches_numpy(k):
    x = f32(4)
    (got,) = run(DIAMOND, x, k)
    close(got, _diamond(x, k))


def test_nested_conditions_each_returning():
    x = f32(3)
    for a, b in itertools.product((2, -1), (5, 0)):
        got, tag = run(NESTED, x, a, b)
        want, want_tag = _nested(x, a, b)
        close(got, want)
        assert int(tag) == want_tag


def test_join_block_reached_from_separate_paths_is_copied_into_each():
    program = parse_program(JOIN, "join.mlir")
    assert not program.unsupported, program.unsupported
    # Three blocks contain a generic (^b's sub, and ^join's mul twice).
    assert kinds(program.function("main").body).count("generic") == 3
    x, y = f32(5), f32(5)
    for c in itertools.product((0, 1), repeat=3):
        (got,) = run(JOIN, x, y, *c)
        close(got, _join(x, y, *c))


def test_switch_becomes_a_chain_of_conditions():
    x = RNG.integers(-50, 50, 4)
    for flag in (1, 7, 0, -3):
        (got,) = run(SWITCH, x, flag)
        np.testing.assert_array_equal(got, _switch(x, flag), err_msg=f"IRTK_TEST_SEED={SEED}")


def test_switch_on_an_index_flag():
    text = """
func.func @main(%i: index) -> i32 {
  cf.switch %i : index, [
    default: ^r(%i : index),
    2: ^two
  ]
^two:
  %c = arith.constant 20 : index
  cf.br ^r(%c : index)
^r(%v: index):
  %w = arith.index_cast %v : index to i32
  return %w : i32
}
"""
    assert [int(run(text, i)[0]) for i in (2, 3)] == [20, 3]


def test_dump_after_import_shows_the_lifted_scf_if():
    dumps: list[str] = []
    irtk.compile_str(DIAMOND, target="cpu", filename="diamond.mlir", dump_after="import",
                     dump=dumps.append)
    text = "".join(dumps)
    assert "scf.if" in text and "scf.yield" in text
    assert not re.search(r"\bcf\.", text), text


def unsupported(text: str, name: str = "main") -> str:
    program = parse_program(text, "cfg.mlir")
    assert name in program.unsupported, "expected the function to be refused"
    return program.unsupported[name]


def test_a_loop_is_a_located_error_naming_scf_while():
    text = """func.func @main(%n: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  cf.br ^head(%c0 : i32)
^head(%i: i32):
  %one = arith.constant 1 : i32
  %j = arith.addi %i, %one : i32
  %more = arith.cmpi slt, %j, %n : i32
  cf.cond_br %more, ^head(%j : i32), ^done
^done:
  return %j : i32
}
"""
    message = unsupported(text)
    assert message.startswith("cfg.mlir:8:3: error: control flow loops back from ^head to ^head")
    assert "scf.while or scf.for" in message


def test_a_value_from_a_block_that_does_not_dominate_its_use_is_refused():
    text = """func.func @main(%c: i1, %x: i32) -> i32 {
  cf.cond_br %c, ^a, ^b
^a:
  %v = arith.addi %x, %x : i32
  cf.br ^j
^b:
  cf.br ^j
^j:
  return %v : i32
}
"""
    message = unsupported(text)
    assert message.startswith("cfg.mlir:9:3: error: 'func.return' uses a value of ^a, which "
                              "does not dominate ^j"), message


def test_a_branch_operand_of_the_wrong_type_is_refused():
    text = """func.func @main(%x: i32) -> i32 {
  cf.br ^j(%x : i32)
^j(%v: i64):
  %t = arith.trunci %v : i64 to i32
  return %t : i32
}
"""
    message = unsupported(text)
    assert message.startswith("cfg.mlir:2:3: error: 'cf.br' passes i32 as value #0 to the "
                              "arguments of ^j, which is i64"), message


def duplicating_chain(levels: int) -> str:
    """Each level's block is reached from two paths that can also return on their own, so
    lifting copies level n 2**n times."""
    lines = ["func.func @main(%x: tensor<2xf32>, %c: i1) -> tensor<2xf32> {",
             "  %e = tensor.empty() : tensor<2xf32>", "  cf.br ^l0(%x : tensor<2xf32>)"]
    for n in range(levels):
        lines += [
            f"^l{n}(%v{n}: tensor<2xf32>):",
            f"  %w{n} = linalg.add ins(%v{n}, %x : tensor<2xf32>, tensor<2xf32>) "
            f"outs(%e : tensor<2xf32>) -> tensor<2xf32>",
            f"  cf.cond_br %c, ^p{n}, ^q{n}",
            f"^p{n}:",
            f"  cf.cond_br %c, ^l{n + 1}(%w{n} : tensor<2xf32>), ^r{n}",
            f"^q{n}:",
            f"  cf.cond_br %c, ^l{n + 1}(%v{n} : tensor<2xf32>), ^r{n}",
            f"^r{n}:",
            f"  return %w{n} : tensor<2xf32>"]
    lines += [f"^l{levels}(%v{levels}: tensor<2xf32>):", f"  return %v{levels} : tensor<2xf32>",
              "}"]
    return "\n".join(lines) + "\n"


def test_copies_of_join_blocks_are_bounded_with_a_located_error():
    message = unsupported(duplicating_chain(14))
    assert message.startswith("cfg.mlir:") and ": error: lifting this function's branches to "\
        "scf.if copies blocks reached from several paths into more than " in message, message
    assert f"{cfg.MAX_DUPLICATED_OPS} extra ops" in message


def test_a_small_duplicating_chain_lifts_and_computes():
    x = f32(2)
    for c in (0, 1):
        (got,) = run(duplicating_chain(3), x, c)
        # c true: every level adds x; c false: every level's ^q branch passes %v on, and
        # ^q's cond_br (also c) goes to ^r, which returns level 0's sum.
        close(got, 4 * x if c else 2 * x)


GENERIC_WITH = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%v: f32, %o: f32):
BODY
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


@pytest.mark.parametrize(("body", "where", "fragment"), [
    ("    cf.br ^bb0(%v, %o : f32, f32)", "7:5", "the body must end in linalg.yield"),
    # (cf.assert in a body: tests/compiler/frontend/test_asserts.py)
    ("    cf.br ^bb1(%v : f32)\n  ^bb1(%w: f32):\n    linalg.yield %w : f32", "3:3",
     "expected a single block"),
])
def test_control_flow_inside_a_linalg_body_is_still_refused(body, where, fragment):
    text = GENERIC_WITH.replace("BODY", body)
    try:
        message = unsupported(text)
    except irtk.ParseError as e:     # refused by xDSL's verification of the region
        message = str(e)
    assert message.startswith(f"cfg.mlir:{where}: error:") and fragment in message, message


def test_a_branch_inside_an_scf_region_is_refused():
    text = """func.func @main(%c: i1, %x: i32) -> i32 {
  %r = scf.if %c -> (i32) {
    cf.br ^bb1
  ^bb1:
    scf.yield %x : i32
  } else {
    scf.yield %x : i32
  }
  return %r : i32
}
"""
    try:
        message = unsupported(text)
    except irtk.ParseError as e:    # xDSL: scf regions hold a single block
        message = str(e)
    assert message.startswith("cfg.mlir:2:3: error:") and "single block" in message, message


# ---- end to end ----------------------------------------------------------------------------
DEVICES = ["local-task"] + [d for d in vulkan_device_uris()][:1]


def compiled(text: str, device: str) -> bytes:
    return irtk.compile_str(text, target=target_for(device), filename="cfg.mlir")


@pytest.mark.parametrize("device", DEVICES)
def test_lifted_programs_run_on_the_device(device):
    rng = np.random.default_rng(SEED)
    x = rng.standard_normal(4).astype(np.float32)
    m = irtk.load(compiled(DIAMOND, device), device=device)
    for k in (3, -2):
        close(m.main(x, np.int32(k)), _diamond(x.astype(np.float64), k))
    x3 = rng.standard_normal(3).astype(np.float32)
    m = irtk.load(compiled(NESTED, device), device=device)
    for a, b in ((4, 1), (4, -1), (-3, 6)):
        got, tag = m.main(x3, np.int32(a), np.int32(b))
        want, want_tag = _nested(x3.astype(np.float64), a, b)
        close(got, want)
        assert int(tag) == want_tag
    xs, ys = (rng.standard_normal(5).astype(np.float32) for _ in range(2))
    m = irtk.load(compiled(JOIN, device), device=device)
    for c in itertools.product((False, True), repeat=3):
        got = m.main(xs, ys, *(np.bool_(v) for v in c))
        close(got, _join(xs.astype(np.float64), ys.astype(np.float64), *c))
    xi = rng.integers(-50, 50, 4).astype(np.int32)
    m = irtk.load(compiled(SWITCH, device), device=device)
    for flag in (1, 7, 2):
        np.testing.assert_array_equal(m.main(xi, np.int32(flag)), _switch(xi, flag))


@pytest.mark.parametrize("device", DEVICES)
def test_conformance_function_runs_with_its_run_line_input(device, tmp_path):
    """IREE's RUN line passes --input="1": the cf.cond_br takes ^bb2, a splat of ones."""
    target = target_for(device)
    vmfb = tmp_path / "cfg.vmfb"
    p = irtk_cli("compile", str(CONFORMANCE), f"--target={target}", "-o", str(vmfb))
    assert p.returncode == 0, p.stderr
    p = irtk_cli("run", str(vmfb), f"--device={device}", "--function=simple_test_with_cfg",
                 "--input=i8=1")
    assert p.returncode == 0, p.stderr
    assert "2x4xf32=[1 1 1 1][1 1 1 1]" in p.stdout, p.stdout
    m = irtk.load(vmfb.read_bytes(), device=device)
    np.testing.assert_array_equal(m.simple_test_with_cfg(np.int8(-5)), np.ones((2, 4)))
    assert m.simple_test_with_cfg(np.int8(0)).shape == (2, 4)   # ^bb1: an empty tensor


def irtk_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "irtk.cli", *args], capture_output=True,
                          text=True, timeout=300)
