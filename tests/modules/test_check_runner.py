"""The check runner's Python API: finding test functions, narrowing a failure down to the
function it belongs to, PASS / FAIL / SKIP for each function."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from irtk import check_runner
from irtk.check_runner import (FAIL, PASS, SKIP, CheckResult, compile_checks, find_functions,
                               missing_feature, run_checks, run_compiled, text_for_function)
from irtk.errors import DeviceError, InputError, ParseError
from irtk.hal import DeviceInfo, ExecutableRequirements, registry
from tests.conftest import all_device_uris
from tests.modules.check_programs import checks_module

IOTA = """
func.func @iota() -> tensor<8xi32> {
  %e = tensor.empty() : tensor<8xi32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>],
                       iterator_types = ["parallel"]} outs(%e : tensor<8xi32>) {
  ^bb0(%o: i32):
    %i = linalg.index 0 : index
    %c = arith.index_cast %i : index to i32
    linalg.yield %c : i32
  } -> tensor<8xi32>
  return %r : tensor<8xi32>
}
"""

SCALE = """
func.func @scale(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %e = tensor.empty() : tensor<2x3xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
                                        affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2x3xf32>) outs(%e : tensor<2x3xf32>) {
  ^bb0(%a: f32, %o: f32):
    %d = arith.addf %a, %a : f32
    linalg.yield %d : f32
  } -> tensor<2x3xf32>
  return %r : tensor<2x3xf32>
}
"""

BROKEN = """
func.func @broken() -> tensor<4xf32> {
  %0 = "nowhere.op"() : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


def write(tmp_path: Path, text: str, name: str = "prog.mlir") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- finding functions --------------------------------------------------------------------------

def test_find_functions_sees_names_visibility_arguments_and_lines():
    text = ('// a comment with func.func @not_this() {\n'
            'util.global private @g = dense<1.0> : tensor<f32>\n'
            'func.func private @helper(%a: tensor<f32>) -> tensor<f32> {\n'
            '  return %a : tensor<f32>\n}\n'
            'func.func @"quoted.name"() {\n  %s = "x.y"() {s = "}{"} : () -> ()\n'
            '  %0 = call @helper(%c) : (tensor<f32>) -> tensor<f32>\n  return\n}\n'
            'func.func @takes(\n    %x: tensor<4xf32>)\n    -> tensor<4xf32> {\n'
            '  return %x : tensor<4xf32>\n}\n')
    found = find_functions(text)
    assert [(f.name, f.public, f.takes_args, f.first_line, f.last_line) for f in found] == [
        ("helper", False, True, 3, 5), ("quoted.name", True, False, 6, 10),
        ("takes", True, True, 11, 15)]
    assert "helper" in found[1].references


def test_text_for_function_blanks_other_public_functions_keeping_locations():
    text = IOTA + SCALE + BROKEN
    functions = find_functions(text)
    alone = text_for_function(text, functions, "scale")
    assert len(alone) == len(text) and alone.count("\n") == text.count("\n")
    assert "@scale" in alone and "@iota" not in alone and "nowhere.op" not in alone
    start = text.index("func.func @scale")
    assert alone[start:start + 200] == text[start:start + 200]


def test_text_for_function_keeps_public_functions_it_calls():
    text = ("func.func @callee() {\n  return\n}\n"
            "func.func @caller() {\n  call @callee() : () -> ()\n  return\n}\n"
            "func.func @other() {\n  return\n}\n")
    alone = text_for_function(text, find_functions(text), "caller")
    assert "@callee()" in alone and "@other" not in alone


# -- compiling and running ----------------------------------------------------------------------

@pytest.mark.parametrize("device", all_device_uris())
def test_functions_pass_on_every_device(tmp_path, device):
    results = run_checks(write(tmp_path, IOTA + SCALE), device=device, include_args=True,
                         seed=1)
    assert results == [CheckResult("iota", PASS), CheckResult("scale", PASS)]


def test_zero_argument_functions_only_unless_asked(tmp_path):
    results = run_checks(write(tmp_path, IOTA + SCALE), device="local-sync")
    assert [r.function for r in results] == ["iota"]


def test_a_function_that_does_not_compile_fails_alone(tmp_path):
    path = write(tmp_path, IOTA + BROKEN + SCALE)
    compiled = compile_checks(path, "cpu")
    assert compiled.module is None and isinstance(compiled.file_error, ParseError)
    results = run_compiled(compiled, "local-task", include_args=True, seed=2)
    assert [(r.function, r.status) for r in results] == [
        ("iota", PASS), ("broken", FAIL), ("scale", PASS)]
    line = (IOTA + BROKEN).count("\n", 0, (IOTA + BROKEN).index('"nowhere.op"')) + 1
    assert results[1].message.startswith(f"does not compile: {path}:{line}:")
    assert "nowhere.op" in results[1].message


def test_only_some_functions(tmp_path):
    compiled = compile_checks(write(tmp_path, IOTA + BROKEN + SCALE), "cpu")
    results = run_compiled(compiled, "local-sync", include_args=True, only={"scale"})
    assert results == [CheckResult("scale", PASS)]


def test_an_error_outside_every_function_fails_the_whole_file(tmp_path):
    path = write(tmp_path, "this is not MLIR\n" + IOTA)
    with pytest.raises(ParseError, match=r"prog\.mlir:1:1: error:"):
        compile_checks(path, "cpu")
    with pytest.raises(InputError, match=r"cannot read '.*missing\.mlir'"):
        compile_checks(tmp_path / "missing.mlir", "cpu")


def test_check_failures_runtime_errors_and_passes_from_a_module_file(tmp_path):
    path = tmp_path / "checks.vmfb"
    path.write_bytes(checks_module())
    results = run_checks(path, device="local-sync")
    assert [(r.function, r.status) for r in results] == [
        ("all_pass", PASS), ("one_fails", FAIL), ("two_fail_then_return", FAIL),
        ("raises", FAIL)]
    assert results[1].message == "Expected true but got 0 (false)"
    assert results[2].message == ("Expected true but got 0 (false)\n"
                                  "Expected false but got 5 (true)")
    assert results[3].message.startswith("RuntimeFailure: hal.buffer.length: buffer must be")


def test_functions_with_arguments_get_fresh_random_inputs(tmp_path):
    path = tmp_path / "checks.vmfb"
    path.write_bytes(checks_module())
    results = {r.function: r for r in run_checks(path, device="local-sync", include_args=True,
                                                 seed=3)}
    # Two independent normal vectors are neither equal nor within 0.01 of each other.
    assert results["compare_eq"].status == FAIL
    assert "Expected equality of these values" in results["compare_eq"].message
    assert results["compare_near"].status == FAIL


def test_random_inputs_follow_the_reflected_types():
    from irtk import runtime
    from irtk.modules.check import CheckModule
    loaded = runtime.load(checks_module(), device="local-sync", native_modules=[CheckModule()])
    rng = np.random.default_rng(4)
    a, b = check_runner.random_inputs(loaded["compare_eq"], rng)
    assert a.shape == (4,) and a.dtype == np.float32 and not np.array_equal(a, b)


# -- skipping what a device cannot run ----------------------------------------------------------

def _refusal_text() -> str:
    """The words the Vulkan driver uses to refuse an executable that needs f16 and i64."""
    from hal_vulkan.executable_def import ExecutableSpec
    from hal_vulkan.requirements import problems
    info = DeviceInfo("vulkan", "SwiftShader Device (Subzero)", api_version="1.3")
    spec = ExecutableSpec("default", (), (), ExecutableRequirements(float16=True, int64=True))
    return "; ".join(problems(spec, info))


def test_missing_feature_reads_the_drivers_refusal():
    text = _refusal_text()
    assert missing_feature(DeviceError(text)) == (
        "device 'SwiftShader Device (Subzero)' has no 16-bit float support (shaderFloat16); "
        "device 'SwiftShader Device (Subzero)' has no 64-bit integer support (shaderInt64)")
    assert missing_feature(DeviceError("executable needs 512 bytes of push constants")) is None


@pytest.mark.parametrize("source", ["mlir", "vmfb"])
def test_a_device_refusing_a_feature_skips_the_function(tmp_path, monkeypatch, source):
    device = registry.get_driver("local-sync").create_device(0)
    text = _refusal_text()

    def refuse(executable_format: str, data: bytes):
        raise DeviceError(text)

    monkeypatch.setattr(device, "create_executable", refuse)
    if source == "mlir":
        path = write(tmp_path, IOTA)
    else:
        import irtk
        path = tmp_path / "iota.vmfb"
        path.write_bytes(irtk.compile_file(str(write(tmp_path, IOTA)), target="cpu"))
    (result,) = run_compiled(compile_checks(path, "cpu"), device)
    assert result.status == SKIP
    assert result.message.startswith("device 'SwiftShader Device (Subzero)' has no 16-bit "
                                     "float support (shaderFloat16)")


def test_other_load_failures_fail(tmp_path, monkeypatch):
    device = registry.get_driver("local-sync").create_device(0)

    def refuse(executable_format: str, data: bytes):
        raise DeviceError("executable needs 9999 bytes of shared memory")

    monkeypatch.setattr(device, "create_executable", refuse)
    (result,) = run_compiled(compile_checks(write(tmp_path, IOTA), "cpu"), device)
    assert result.status == FAIL and result.message.startswith("does not load: ")
    assert "9999 bytes of shared memory" in result.message


def test_a_compiler_crash_fails_the_function_as_an_internal_error(tmp_path, monkeypatch):
    import irtk

    def crash(*args, **kwargs):
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(irtk, "compile_str", crash)
    (result,) = run_checks(write(tmp_path, IOTA), device="local-sync")
    assert result == CheckResult("iota", FAIL,
                                 "does not compile: internal error: ZeroDivisionError: boom")


def test_result_lines_and_summary():
    results = [CheckResult("a", PASS), CheckResult("b", FAIL, "Expected x\nmore"),
               CheckResult("c", SKIP, "device 'D' has no 16-bit float support (shaderFloat16)")]
    assert [r.line() for r in results] == [
        "[PASS] a", "[FAIL] b: Expected x\nmore",
        "[SKIP] c: device 'D' has no 16-bit float support (shaderFloat16)"]
    assert check_runner.summary(results) == "1 passed, 1 failed, 1 skipped"


UNSUPPORTED = """
func.func @unsupported() {
  %r = bufferization.alloc_tensor() : tensor<4xf32>
  check.expect_almost_eq_const(%r, dense<1.0> : tensor<4xf32>) : tensor<4xf32>
  return
}
"""

F64 = """
func.func @add_f64() {
  %a = util.unfoldable_constant dense<[1.0, 2.0]> : tensor<2xf64>
  %0 = tensor.empty() : tensor<2xf64>
  %r = linalg.add ins(%a, %a : tensor<2xf64>, tensor<2xf64>) outs(%0 : tensor<2xf64>) -> tensor<2xf64>
  check.expect_almost_eq_const(%r, dense<[2.0, 4.0]> : tensor<2xf64>) : tensor<2xf64>
  return
}
"""


def test_a_function_left_out_of_the_partial_module_says_it_does_not_compile(tmp_path):
    path = write(tmp_path, IOTA + UNSUPPORTED)
    compiled = compile_checks(path, "cpu")
    assert compiled.module is not None and compiled.file_error is None
    assert set(compiled.compile_failures) == {"unsupported"}
    results = run_compiled(compiled, "local-sync")
    assert [(r.function, r.status) for r in results] == [("iota", PASS), ("unsupported", FAIL)]
    assert results[1].message.startswith(f"does not compile: {path}:")
    assert "unsupported op 'bufferization.alloc_tensor' (in function 'unsupported')" in \
        results[1].message


def test_f64_on_a_device_without_it_is_a_skip_that_names_the_feature(tmp_path):
    from irtk.compiler.targets import suited_profile
    from tests.conftest import device_info, vulkan_device_uris
    for uri in vulkan_device_uris():
        info = device_info(uri)
        compiled = compile_checks(write(tmp_path, IOTA + F64), "vulkan-spirv",
                                  vulkan_target=suited_profile(info), demote_f64=False)
        results = run_compiled(compiled, uri)
        # By default f64 is computed in f32 (as IREE), so the test runs everywhere.
        demoted = run_compiled(compile_checks(write(tmp_path, IOTA + F64), "vulkan-spirv",
                                              vulkan_target=suited_profile(info)), uri)
        assert [r.status for r in demoted] == [PASS, PASS], demoted
        if info.float64:
            assert [r.status for r in results] == [PASS, PASS], results
        else:
            assert results[1] == CheckResult(
                "add_f64", SKIP, f"device '{info.name}' has no 64-bit float support "
                                 "(shaderFloat64)")
