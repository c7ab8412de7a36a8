"""Host lowering as VM code: submissions, barriers only between dependent dispatches, argument
checks, failing functions and the dump options."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import irtk
from irtk.compiler import tir
from irtk.compiler.driver import compile_program, parse_dump_phases
from irtk.compiler.constants import HOST_INIT_BYTES
from irtk.compiler.kernel import Op
from irtk.compiler.module_context import ModuleContext
from irtk.compiler.vm_codegen import ModuleGen
from irtk.vm.disassembler import disassemble_module
from tests.compiler.tir_build import S, T, function, program
from tests.conftest import all_device_uris, target_for
from tests.e2e import host_programs as P


def exp(b, x):
    return b.elementwise([x], b.empty(x.type), [Op("math.exp", (0,), "f32")])


def held(b, v):
    return b.op("barrier", [v], [v.type]).result


def function_text(data: bytes, name: str) -> str:
    text = disassemble_module(data, rodata_limit=16)
    start = text.index(f"func @{name} ")
    return text[start:text.index("\n}", start)]


def calls(text: str, name: str) -> int:
    return len(re.findall(rf"@{re.escape(name)}[ (\[]", text))


def test_module_generator_provides_what_host_lowering_asks_of_it():
    module = ModuleGen(tir.Program([]), {}, [], "m")
    wanted = set(ModuleContext.__annotations__) | {
        name for name, v in vars(ModuleContext).items() if callable(v) and name[0] != "_"}
    assert wanted and not [name for name in wanted if not hasattr(module, name)]


def test_static_segments_are_recorded_once_and_resubmitted_with_bindings():
    def build(b, x, y):
        return [held(b, exp(b, x)), held(b, exp(b, y))]
    data = compile_program(program(function("main", [T(4), T(4)], build)), target="cpu")
    main, init = function_text(data, "main"), function_text(data, "__init")
    assert calls(main, "hal.command_buffer.dispatch") == 0
    assert calls(main, "hal.device.queue.execute.indirect") == 1
    assert calls(init, "hal.command_buffer.dispatch") == 2
    assert calls(init, "hal.command_buffer.execution_barrier") == 0
    m = irtk.load(data, device="local-sync")
    for k in range(3):
        x, y = np.full(4, k, np.float32), np.linspace(-1, k, 4).astype(np.float32)
        ex, ey = m.main(x, y)
        np.testing.assert_allclose(ex, np.exp(x.astype(np.float64)), rtol=1e-6)
        np.testing.assert_allclose(ey, np.exp(y.astype(np.float64)), rtol=1e-6)


def test_dependent_dispatches_get_one_barrier_each():
    def build(b, x):
        return held(b, exp(b, held(b, exp(b, held(b, exp(b, x))))))
    data = compile_program(program(function("main", [T(4)], build)), target="cpu")
    init = function_text(data, "__init")
    assert calls(init, "hal.command_buffer.dispatch") == 3
    assert calls(init, "hal.command_buffer.execution_barrier") == 2
    assert calls(function_text(data, "main"), "hal.device.queue.execute.indirect") == 1


def test_small_filled_outputs_start_from_rodata_so_their_segment_stays_recorded():
    data = compile_program(P.reduction_program(3, 4), target="cpu")
    main = function_text(data, "main")
    assert calls(main, "hal.command_buffer.fill_buffer") == 0
    assert calls(main, "hal.allocator.allocate.initialized") == 2  # sums (0.0), max (-inf)
    assert calls(main, "hal.command_buffer.dispatch") == 0
    assert calls(main, "hal.device.queue.execute.indirect") == 1
    m = irtk.load(data, device="local-sync")
    rng = np.random.default_rng()
    for _ in range(2):  # the second call must not see the first one's sums
        x = rng.standard_normal((3, 4)).astype(np.float32)
        biased, colmax = m.main(x)
        np.testing.assert_allclose(
            biased, x.astype(np.float64).sum(axis=1) + np.linspace(-1, 1, 3), rtol=1e-5,
            atol=1e-6)
        np.testing.assert_allclose(colmax, np.exp(x.astype(np.float64)).max(axis=0),
                                   rtol=1e-6)


def assert_recorded_once(data: bytes, command: str) -> None:
    """`main`'s one segment, holding `command` once, is recorded by `__init` and only
    submitted per call."""
    init, main = function_text(data, "__init"), function_text(data, "main")
    assert calls(init, command) == 1
    assert calls(main, command) == 0
    assert calls(main, "hal.command_buffer.create") == 0
    assert calls(main, "hal.command_buffer.dispatch") == 0
    assert calls(main, "hal.device.queue.execute.indirect") == 1


@pytest.mark.parametrize("uri", all_device_uris())
def test_large_static_fills_are_recorded_once_with_their_target_a_slot(uri):
    rows = HOST_INIT_BYTES // 4 + 1  # an f32 output just over the rodata limit
    data = compile_program(P.reduction_program(rows, 2), target=target_for(uri))
    assert_recorded_once(data, "hal.command_buffer.fill_buffer")
    m = irtk.load(data, device=uri)
    rng = np.random.default_rng()
    for _ in range(3):  # each call's sums start from the fill, not the last call's sums
        x = rng.standard_normal((rows, 2)).astype(np.float32)
        biased, colmax = m.main(x)
        np.testing.assert_allclose(
            biased, x.astype(np.float64).sum(axis=1) + np.linspace(-1, 1, rows), rtol=1e-5,
            atol=1e-5)
        np.testing.assert_allclose(colmax, np.exp(x.astype(np.float64)).max(axis=0),
                                   rtol=1e-6)


@pytest.mark.parametrize("uri", all_device_uris())
def test_static_copies_are_recorded_once_with_source_and_target_slots(uri):
    def build(b, x, acc):
        return b.row_sum(x, acc)   # reads its init, an argument: copied first
    data = compile_program(program(function("main", [T(5, 3), T(5)], build)),
                           target=target_for(uri))
    assert_recorded_once(data, "hal.command_buffer.copy_buffer")
    m = irtk.load(data, device=uri)
    rng = np.random.default_rng()
    for _ in range(3):  # each call starts from its own argument, which stays as it was
        x = rng.standard_normal((5, 3)).astype(np.float32)
        acc = rng.standard_normal(5).astype(np.float32)
        kept = acc.copy()
        np.testing.assert_allclose(m.main(x, acc), acc.astype(np.float64) + x.sum(axis=1),
                                   rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(acc, kept)


def test_segments_with_dynamic_extents_are_recorded_per_call():
    main = function_text(compile_program(P.dynamic_program(), target="cpu"), "main")
    assert calls(main, "hal.command_buffer.dispatch") >= 1
    assert calls(main, "hal.device.queue.execute") == 1
    assert calls(main, "hal.device.queue.execute.indirect") == 0


def test_a_host_read_submits_and_waits_first():
    def build(b, x):
        return b.scalar("tensor.extract", [exp(b, x), b.index(2)], S("f32"))
    data = compile_program(program(function("main", [T(4)], build)), target="cpu")
    text = function_text(data, "main")
    load = text.index("@hal.buffer.load")
    assert 0 < text.rfind("@hal.device.queue.execute.indirect", 0, load) \
        < text.rfind("@hal.fence.await", 0, load)
    x = np.linspace(-1, 1, 4).astype(np.float32)
    assert irtk.load(data, device="local-sync").main(x) == pytest.approx(np.exp(x[2]))


def test_static_arguments_are_checked_with_one_assert():
    text = function_text(compile_program(P.matmul_bias_relu_program(2, 3, 4), target="cpu"),
                         "main")
    assert calls(text, "hal.buffer_view.assert") == 3
    assert calls(text, "hal.buffer_view.rank") == 0


def test_dynamic_arguments_check_rank_and_read_dims():
    text = function_text(compile_program(P.dynamic_program(), target="cpu"), "main")
    assert calls(text, "hal.buffer_view.rank") == 2
    assert calls(text, "hal.buffer_view.dim") == 2


def test_a_function_that_does_not_compile_is_a_compile_error_naming_it():
    p = program(function("good", [T(4)], exp))
    p.unsupported["bad"] = "test.mlir:7:3: error: unsupported op 'tensor.frobnicate'"
    with pytest.raises(irtk.CompileError, match=r"^test.mlir:7:3: error: unsupported op "
                                                r"'tensor.frobnicate' \(in function 'bad'\)$"):
        compile_program(p, target="cpu")


def test_partial_keeps_unsupported_functions_as_stubs_that_fail_at_run_time():
    good = function("good", [T(4)], exp)
    p = program(good)
    p.unsupported["bad"] = "test.mlir:7:3: error: unsupported op 'tensor.frobnicate'"
    with pytest.warns(irtk.CompileWarning, match="in function 'bad'"):
        data = compile_program(p, target="cpu", partial=True)
    m = irtk.load(data, device="local-sync")
    x = np.linspace(-1, 1, 4).astype(np.float32)
    np.testing.assert_allclose(m.good(x), np.exp(x.astype(np.float64)), rtol=1e-6)
    with pytest.raises(irtk.RuntimeFailure, match="test.mlir:7:3: error: unsupported op "
                                                  "'tensor.frobnicate'"):
        m.bad()


def test_a_function_failing_in_host_lowering_fails_at_run_time():
    def bad(b, x):
        v = b.scalar("tensor.extract", [x, b.index(0)], S("f32"))
        return b.scalar("math.cbrt", [v], S("f32"))
    good = function("good", [T(4)], exp)
    p = program(function("bad", [T(4)], bad), good)
    with pytest.raises(irtk.CompileError, match=r"math.cbrt.*\(in function 'bad'\)"):
        compile_program(p, target="cpu")
    p = program(function("bad", [T(4)], bad), good)
    with pytest.warns(irtk.CompileWarning, match="math.cbrt"):
        m = irtk.load(compile_program(p, target="cpu", partial=True), device="local-sync")
    with pytest.raises(irtk.RuntimeFailure, match=r"test.mlir:\d+:3: error: .*math.cbrt"):
        m.bad(np.ones(4, np.float32))
    assert m.good(np.zeros(4, np.float32)).tolist() == [1.0] * 4


def test_a_file_where_nothing_compiles_is_a_compile_error():
    p = program()
    p.unsupported["main"] = "test.mlir:2:3: error: unsupported op 'x.y'"
    with pytest.raises(irtk.CompileError, match="test.mlir:2:3: error: unsupported op"):
        compile_program(p, target="cpu")


def test_dump_after_prints_each_phase():
    seen: list[str] = []
    compile_program(P.matmul_bias_relu_program(2, 3, 4), target="cpu", dump_after="all",
                    dump=seen.append)
    phases = ("import", "const-eval", "dispatch", "stream", "vm")
    assert [s.splitlines()[0] for s in seen] == [f"// ----- IR after {p} -----" for p in phases]
    assert seen[0].count("linalg.generic") == 4 and "flow.dispatch" not in seen[0]
    assert seen[1].count("linalg.generic") == 4   # nothing here depends only on constants
    assert seen[2].count("flow.dispatch @main_dispatch_0_contraction") == 1
    assert "fill out0 = 0.0" in seen[2]
    assert "out0: fill in storage" in seen[3] and "out1: alloc in storage" in seen[3]
    assert "func @main" in seen[4] and "@hal.command_buffer.dispatch" in seen[4]


def test_dump_phase_names_are_checked():
    assert parse_dump_phases("stream,import") == ["stream", "import"]
    with pytest.raises(irtk.CompileError, match="unknown phase 'flow'.*import, const-eval, dispatch"):
        parse_dump_phases("flow")


MLIR = """func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]}
      ins(%a : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%x: f32, %o: f32):
    %s = math.exp %x : f32
    linalg.yield %s : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}
"""


def test_cli_dump_options(tmp_path: Path):
    src = tmp_path / "prog.mlir"
    src.write_text(MLIR)
    out = tmp_path / "prog.vmfb"
    spv = tmp_path / "spirv"
    p = subprocess.run([sys.executable, "-m", "irtk.cli", "compile", str(src), "-o", str(out),
                        "--dump-after=dispatch", f"--dump-spirv={spv}"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "// ----- IR after dispatch -----" in p.stdout
    assert "flow.dispatch @main_dispatch_0_elementwise" in p.stdout
    assert (spv / "main_dispatch_0_elementwise.spv").read_bytes()[:4] == \
        (0x07230203).to_bytes(4, "little")
    assert "OpEntryPoint GLCompute" in (spv / "main_dispatch_0_elementwise.spvasm").read_text()
    bad = subprocess.run([sys.executable, "-m", "irtk.cli", "compile", str(src), "-o", str(out),
                          "--dump-after=flow"], capture_output=True, text=True)
    assert bad.returncode == 1 and "unknown phase 'flow'" in bad.stderr


def test_function_values_are_typed_in_the_printer():
    text = []
    compile_program(P.global_program(), target="cpu", dump_after="import", dump=text.append)
    assert "util.global private mutable @acc = dense<0.0, ...> (12 elements) : " \
        "tensor<3x4xf32>" in text[0]
    assert "util.global private mutable @calls = 5 : i32" in text[0]
    assert isinstance(P.global_program().globals[0], tir.Global)


@pytest.mark.parametrize("bank", ["i32", "index"])
def test_host_integer_division_rounds_like_mlir(bank):
    def build(b, x, y):
        return [b.scalar(k, [x, y], S(bank)) for k in
                ("arith.ceildivsi", "arith.floordivsi", "arith.divsi", "arith.remsi")]
    m = irtk.load(compile_program(program(function("main", [S(bank), S(bank)], build)),
                                  target="cpu"), device="local-sync")
    for x in (7, -7, 6, -6, 0, 1, -1):
        for y in (2, -2, 3, -3, 1):
            ceil, floor, trunc, rem = m.main(x, y)
            assert (ceil, floor) == (-(-x // y), x // y), (x, y)
            assert trunc == int(x / y) and rem == x - int(x / y) * y


def test_host_unsigned_ceil_division():
    def build(b, x, y):
        return b.scalar("arith.ceildivui", [x, y], S("i32"))
    m = irtk.load(compile_program(program(function("main", [S("i32"), S("i32")], build)),
                                  target="cpu"), device="local-sync")
    for x, y in ((7, 2), (8, 2), (0, 5), (1, 7), (-1, 2)):
        expected = -(-(x % 2**32) // y)
        assert m.main(x, y) % 2**32 == expected % 2**32


def test_a_global_that_cannot_be_stored_fails_only_its_users():
    bad = tir.Global("bad", T(None, 2), None, True, "test.mlir:1:1")
    dyn = tir.Global("dyn", T(None, 2), np.arange(6, dtype=np.float32).reshape(3, 2), True)

    def uses(name):
        def build(b):
            return b.op("global.load", [], [T(None, 2)], {"name": name}).result
        return build
    p = program(function("use_bad", [], uses("bad")), function("use_dyn", [], uses("dyn")),
                globals=[bad, dyn])
    with pytest.warns(irtk.CompileWarning, match="global '@bad'"):
        m = irtk.load(compile_program(p, target="cpu", partial=True), device="local-sync")
    np.testing.assert_array_equal(m.use_dyn(), np.arange(6).reshape(3, 2))
    with pytest.raises(irtk.RuntimeFailure, match="global '@bad' has a dynamic shape and no "
                                                  "initial value"):
        m.use_bad()


def test_loops_submit_without_waiting_until_the_host_needs_data():
    text = function_text(compile_program(P.loop_program(3), target="cpu"), "main")
    body = text[text.index("cond_br"):text.rindex("return")]
    # The loop body submits (chained on the previous submission's fence) but never waits;
    # the only wait is before the results are returned.
    assert calls(body, "hal.device.queue.execute.indirect") == 1
    assert calls(text, "hal.fence.await") == 1
    assert text.rindex("@hal.fence.await") > text.rindex("@hal.device.queue.execute.indirect")


@pytest.mark.parametrize("uri", all_device_uris())
@pytest.mark.parametrize("rows", [4, HOST_INIT_BYTES // 4 + 1])
def test_recorded_segments_bind_constants_themselves(uri, rows):
    """A constant's buffer is bound in the recorded segment (the module's global): a call's
    binding table holds only the call's own buffers, its argument and results here. The row
    sum starts from the constant acc: written as its buffer is allocated when small, else a
    copy in the segment whose source is acc's global."""
    rng = np.random.default_rng()
    w = rng.standard_normal((3, 5)).astype(np.float32)
    acc = rng.standard_normal(rows).astype(np.float32)

    def build(b, x):
        y = b.matmul(x, b.constant(w, T(3, 5)), b.fill(0.0, b.empty(T(rows, 5))))
        return [y, b.row_sum(x, b.constant(acc, T(rows)))]
    data = compile_program(program(function("main", [T(rows, 3)], build)),
                           target=target_for(uri))
    main = function_text(data, "main")
    small = rows * 4 <= HOST_INIT_BYTES
    assert calls(main, "hal.device.queue.execute.indirect") == 1
    # x, the matmul's accumulator and the row sum's; not w or acc
    assert "hal.device.queue.execute.indirect [3]" in main
    init = function_text(data, "__init")
    assert calls(init, "hal.command_buffer.copy_buffer") == (0 if small else 1)
    m = irtk.load(data, device=uri)
    for _ in range(3):
        x = rng.standard_normal((rows, 3)).astype(np.float32)
        y, s = m.main(x)
        np.testing.assert_allclose(y, x.astype(np.float64) @ w, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(s, acc.astype(np.float64) + x.sum(axis=1), rtol=1e-5,
                                   atol=1e-5)
