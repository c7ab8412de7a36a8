"""Imports linked against a native module: argument passing, variadic segments, link errors."""
from __future__ import annotations

import pytest

from irtk.errors import RuntimeFailure, VerificationError
from irtk.vm import Context, NativeFunction, NativeModule, RefType, VMBuffer, load_module
from irtk.vm.ref_types import REGISTRY, ref_type_name
from irtk.vm.writer import FunctionBuilder, ModuleWriter
from tests.vm.helpers import f32, f64, i32, i64, ref


class MathModule(NativeModule):
    """A small native module exercising every way arguments and results travel."""

    name = "math"
    EXPORTS = (
        NativeFunction("divmod", "0II_II"),
        NativeFunction("explode", "0v_v"),
        NativeFunction("label", "0r_i"),
        NativeFunction("scale", "0fCiD_f"),
        NativeFunction("weighted", "0CiFDCrD_F"),
    )

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def divmod(self, a: int, b: int) -> tuple[int, int]:
        self.calls.append(("divmod", a, b))
        return a // b, a % b

    def explode(self) -> None:
        raise KeyError("kaboom")

    def label(self, text: VMBuffer) -> int:
        return len(text.text())

    def scale(self, factor: float, values: list[int]) -> float:
        self.calls.append(("scale", factor, values))
        return factor * sum(values)

    def weighted(self, pairs: list[tuple[int, float]], refs: list) -> float:
        self.calls.append(("weighted", pairs, refs))
        return sum(i * w for i, w in pairs) + len(refs)


def build(body, imports: list[tuple[str, str]], cc: str, setup=None) -> bytes:
    w = ModuleWriter("uses-math")
    ordinals = [w.add_import(name, sig) for name, sig in imports]
    if setup:
        setup(w)
    b = FunctionBuilder()
    body(b, ordinals)
    w.add_export("main", w.add_function("main", cc, b))
    return w.to_bytes()


def test_import_call_passes_and_returns_values():
    def body(b, imp):
        b.emit("call.import", imp[0], [i64(0), i64(1)],
               [i64(2), i64(3)])
        b.emit("return", [i64(2), i64(3)])
    native = MathModule()
    ctx = Context(load_module(build(body, [("math.divmod", "0II_II")], "0II_II")), [native])
    assert ctx.call("main", [17, 5]) == [3, 2]
    assert native.calls == [("divmod", 17, 5)]


def test_variadic_import_gets_each_segment_as_a_list():
    def body(b, imp):
        b.emit("const.f32", f32(0), 0.5)
        for i in range(3):
            b.emit("const.i32", i32(i), i + 1)
        b.emit("call.import.variadic", imp[0], [3],
               [f32(0), i32(0), i32(1), i32(2)], [f32(1)])
        b.emit("return", [f32(1)])
    native = MathModule()
    ctx = Context(load_module(build(body, [("math.scale", "0fCiD_f")], "0v_f")), [native])
    assert ctx.call("main") == [3.0]
    assert native.calls == [("scale", 0.5, [1, 2, 3])]


def test_variadic_segments_of_tuples_and_empty_segments():
    def body(b, imp):
        b.emit("const.i32", i32(0), 2)
        b.emit("const.f64", f64(0), 1.5)
        b.emit("const.i32", i32(1), 4)
        b.emit("const.f64", f64(1), 0.25)
        b.emit("call.import.variadic", imp[0], [2, 0],
               [i32(0), f64(0), i32(1), f64(1)], [f64(2)])
        b.emit("return", [f64(2)])
    native = MathModule()
    ctx = Context(load_module(build(body, [("math.weighted", "0CiFDCrD_F")], "0v_F")), [native])
    assert ctx.call("main") == [4.0]
    assert native.calls == [("weighted", [(2, 1.5), (4, 0.25)], [])]


def test_strings_reach_native_code_as_rodata_buffers():
    def setup(w):
        w.add_rodata("name", "text/plain", "héllo".encode())

    def body(b, imp):
        b.emit("const.ref.rodata", ref(0), 0)
        b.emit("call.import", imp[0], [ref(0)], [i32(0)])
        b.emit("return", [i32(0)])
    ctx = Context(load_module(build(body, [("math.label", "0r_i")], "0v_i", setup)),
                  [MathModule()])
    assert ctx.call("main") == [5]


def test_python_exception_in_native_code_becomes_runtime_failure_naming_the_import():
    def body(b, imp):
        b.emit("call.import", imp[0], [], [])
        b.emit("return", [])
    ctx = Context(load_module(build(body, [("math.explode", "0v_v")], "0v_v")), [MathModule()])
    with pytest.raises(RuntimeFailure,
                       match=r"^math.explode: 'kaboom' \(in function 'main' at offset 0\)$"):
        ctx.call("main")


def returns_nothing(b, imp):
    b.emit("return", [])


def test_link_rejects_a_calling_convention_mismatch_with_both_signatures():
    module = load_module(build(returns_nothing, [("math.divmod", "0ii_ii")], "0v_v"))
    with pytest.raises(VerificationError,
                       match="math.divmod: module expects 0ii_ii, runtime provides 0II_II"):
        Context(module, [MathModule()])


def test_link_rejects_an_unknown_function():
    module = load_module(build(returns_nothing, [("math.sqrt", "0f_f")], "0v_v"))
    with pytest.raises(VerificationError, match="import 'math.sqrt' is not provided by module "
                                                "'math'"):
        Context(module, [MathModule()])


def test_link_rejects_an_unknown_module():
    module = load_module(build(returns_nothing, [("check.expect_true", "0i_v")], "0v_v"))
    with pytest.raises(VerificationError, match="import 'check.expect_true': no native module "
                                                "'check' is linked"):
        Context(module, [MathModule()])


def test_native_module_table_must_be_sorted_and_complete():
    with pytest.raises(TypeError, match="must be sorted"):
        class Unsorted(NativeModule):
            name = "u"
            EXPORTS = (NativeFunction("b", "0v_v"), NativeFunction("a", "0v_v"))

            def a(self): ...
            def b(self): ...
    with pytest.raises(TypeError, match="lacks method x_y"):
        class Missing(NativeModule):
            name = "m"
            EXPORTS = (NativeFunction("x.y", "0v_v"),)


class Token:
    """An object a native module hands to bytecode, of a ref type the VM has never heard of."""

    def __init__(self, value: int) -> None:
        self.value = value


TOKEN = RefType("!tokens.token", (Token,))


class TokenModule(NativeModule):
    """A native module that brings its own ref type."""

    name = "tokens"
    REF_TYPES = (TOKEN,)
    EXPORTS = (NativeFunction("make", "0i_r"), NativeFunction("value", "0r_i"))

    def make(self, value: int) -> Token:
        return Token(value)

    def value(self, token: object) -> int:
        if not isinstance(token, Token):
            raise RuntimeFailure(f"tokens.value: expected a {TOKEN.name}, "
                                 f"got {ref_type_name(token)}")
        return token.value


def test_a_native_module_registers_its_ref_types_when_defined():
    assert REGISTRY.lookup("!tokens.token") is TOKEN
    assert ref_type_name(Token(1)) == "!tokens.token"


def test_a_native_modules_own_ref_type_works_end_to_end():
    def setup(w):
        w.add_type("!vm.buffer")
        w.add_type("!tokens.token")

    def body(b, imp):
        b.emit("call.import", imp[0], [i32(0)], [ref(0)])
        b.emit("cmp.type.ref", i32(1), ref(0), 1)     # a token is a !tokens.token ...
        b.emit("cmp.type.ref", i32(2), ref(0), 0)     # ... and not a !vm.buffer
        b.emit("call.import", imp[1], [ref(0)], [i32(3)])
        b.emit("return", [ref(0), i32(1), i32(2), i32(3)])
    module = load_module(build(body, [("tokens.make", "0i_r"), ("tokens.value", "0r_i")],
                               "0i_riii", setup))
    token, is_token, is_buffer, value = Context(module, [TokenModule()]).call("main", [42])
    assert isinstance(token, Token) and (is_token, is_buffer, value) == (1, 0, 42)


def test_a_native_module_cannot_take_a_type_name_another_has():
    with pytest.raises(ValueError, match="ref type '!tokens.token' is already registered"):
        class Impostor(NativeModule):
            name = "impostor"
            REF_TYPES = (RefType("!tokens.token", (VMBuffer,)),)
