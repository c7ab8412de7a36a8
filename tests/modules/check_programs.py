"""Small bytecode modules that call `check.*` imports, built without the compiler, so the
check module and the runner can be tested before the compiler emits check calls."""
from __future__ import annotations

from irtk.modules.check import CheckModule
from irtk.vm.writer import FunctionBuilder, ModuleWriter
from tests.vm.helpers import f32, i32, i64, ref

# The calling convention of each `check.*` import, as the check module declares it.
CHECK_SIGNATURES = {f"check.{f.name}": f.calling_convention for f in CheckModule.EXPORTS}


def _scalar_checks(w: ModuleWriter, name: str, checks: list[tuple[str, int]],
                   result: int | None = None) -> None:
    """An export `name` calling check.expect_true/false on each (import, value) in turn."""
    b = FunctionBuilder()
    for i, (check, value) in enumerate(checks):
        ordinal = w.add_import(check, CHECK_SIGNATURES[check])
        b.emit("const.i32", i32(i), value)
        b.emit("call.import", ordinal, [i32(i)], [])
    if result is None:
        b.emit("return", [])
        cc = "0v_v"
    else:
        b.emit("const.i32", i32(len(checks)), result)
        b.emit("return", [i32(len(checks))])
        cc = "0v_i"
    w.add_export(name, w.add_function(name, cc, b))


def _raising(w: ModuleWriter, name: str) -> None:
    """An export that passes a null ref where hal.buffer.length needs a buffer."""
    b = FunctionBuilder()
    ordinal = w.add_import("hal.buffer.length", "0r_I")
    b.emit("const.ref.null", ref(0))
    b.emit("call.import", ordinal, [ref(0)], [i64(0)])
    b.emit("return", [])
    w.add_export(name, w.add_function(name, "0v_v", b))


def _compare_args(w: ModuleWriter, name: str, check: str) -> None:
    """An export taking two buffer views and comparing them with `check` on the default
    device (expect_almost_eq with atol 0.01, rtol 0)."""
    b = FunctionBuilder()
    device = w.add_import("hal.device.default", "0v_r")
    ordinal = w.add_import(check, CHECK_SIGNATURES[check])
    b.emit("call.import", device, [], [ref(2)])
    args = [ref(2), ref(0), ref(1)]
    if check == "check.expect_almost_eq":
        b.emit("const.f32", f32(0), 0.01)
        b.emit("const.f32", f32(1), 0.0)
        args += [f32(0), f32(1)]
    b.emit("call.import", ordinal, args, [])
    b.emit("return", [])
    w.add_export(name, w.add_function(name, "0rr_v", b), {"abi.args": "4xf32;4xf32"})


def checks_module() -> bytes:
    """Exports, in this order: `all_pass` (expect_true(1), expect_false(0)), `one_fails`
    (expect_true(0) then expect_false(0): the first fails, the second still runs),
    `two_fail_then_return` (expect_true(0), expect_false(5); returns 7), `raises` (a bad hal
    call), `compare_eq` and `compare_near` (two views as arguments)."""
    w = ModuleWriter("checks")
    _scalar_checks(w, "all_pass", [("check.expect_true", 1), ("check.expect_false", 0)])
    _scalar_checks(w, "one_fails", [("check.expect_true", 0), ("check.expect_false", 0)])
    _scalar_checks(w, "two_fail_then_return",
                   [("check.expect_true", 0), ("check.expect_false", 5)], result=7)
    _raising(w, "raises")
    _compare_args(w, "compare_eq", "check.expect_eq")
    _compare_args(w, "compare_near", "check.expect_almost_eq")
    return w.to_bytes()


def passing_module() -> bytes:
    """One export, `fine`, whose checks all pass."""
    w = ModuleWriter("passing")
    _scalar_checks(w, "fine", [("check.expect_true", 3), ("check.expect_false", 0)])
    return w.to_bytes()
