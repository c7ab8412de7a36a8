"""The Python API: loading, argument checking and conversion, results."""
from __future__ import annotations

import numpy as np
import pytest

from irtk import hal
from irtk.errors import InputError, VerificationError
from irtk.runtime import load
from irtk.vm.writer import FunctionBuilder, ModuleWriter
from tests.vm.fakes import FakeDevice
from tests.vm.helpers import f32, i32, ref


def api_module(swap_reflection: dict[str, str] | None = None) -> bytes:
    w = ModuleWriter("api")
    swap = FunctionBuilder()     # swap(a, b) -> (b, a)
    swap.emit("return", [ref(1), ref(0)])
    w.add_export("swap", w.add_function("swap", "0rr_rr", swap), swap_reflection if
                 swap_reflection is not None else {"abi.args": "4x2xf32;4xi32",
                                                   "abi.results": "4xi32;4x2xf32"})
    nothing = FunctionBuilder()
    nothing.emit("return", [])
    w.add_export("nothing", w.add_function("nothing", "0v_v", nothing),
                 {"abi.args": "", "abi.results": ""})
    scale = FunctionBuilder()    # scale(i32 n, f32 x) -> f32 n * x
    scale.emit("cast.si32.f32", f32(1), i32(0))
    scale.emit("mul.f32", f32(1), f32(1), f32(0))
    scale.emit("return", [f32(1)])
    w.add_export("scale", w.add_function("scale", "0if_f", scale),
                 {"abi.args": "i32;f32", "abi.results": "f32"})
    ident = FunctionBuilder()
    ident.emit("return", [ref(0)])
    w.add_export("ident", w.add_function("ident", "0r_r", ident),
                 {"abi.args": "?x3xf32", "abi.results": "?x3xf32"})
    w.add_export("scalar", w.add_function("scalar", "0r_r", ident),
                 {"abi.args": "f32", "abi.results": "f32"})
    return w.to_bytes()


@pytest.fixture
def module():
    return load(api_module(), device=FakeDevice())


def test_function_names_and_lookup(module):
    assert module.function_names == ["swap", "nothing", "scale", "ident", "scalar"]
    assert module["swap"] is module.swap
    assert "scale" in module and "missing" not in module
    assert not hasattr(module, "missing")
    with pytest.raises(InputError, match="module 'api' has no function 'missing'; functions: "
                                         "swap, nothing, scale, ident, scalar"):
        module["missing"]


def test_results_are_arrays_a_tuple_for_several_and_none_for_none(module):
    a = np.arange(8, dtype=np.float32).reshape(4, 2)
    b = np.array([1, 2, 3, 4], np.int32)
    got_b, got_a = module.swap(a, b)
    np.testing.assert_array_equal(got_a, a)
    np.testing.assert_array_equal(got_b, b)
    assert got_a.dtype == np.float32 and got_b.dtype == np.int32
    assert module.nothing() is None


def test_wrong_argument_count(module):
    with pytest.raises(InputError, match="^swap: expected 2 arguments, got 1$"):
        module.swap(np.zeros((4, 2), np.float32))
    with pytest.raises(InputError, match="^nothing: expected 0 arguments, got 1$"):
        module.nothing(1)


def test_wrong_shape_names_the_argument_and_both_types(module):
    with pytest.raises(InputError, match=r"^swap: argument 0: expected 4x2xf32, got 3x2xf32 "
                                         r"\(float32\)$"):
        module.swap(np.zeros((3, 2), np.float32), np.zeros(4, np.int32))


def test_wrong_dtype_of_an_ndarray_is_rejected(module):
    with pytest.raises(InputError, match=r"^swap: argument 1: expected 4xi32, got 4xf32 "
                                         r"\(float32\)$"):
        module.swap(np.zeros((4, 2), np.float32), np.zeros(4, np.float32))


def test_array_likes_are_converted_to_the_expected_type(module):
    got_b, got_a = module.swap([[1, 2], [3, 4], [5, 6], [7, 8]], (1, 2, 3, 4))
    assert got_a.dtype == np.float32 and got_a[3, 1] == 8.0
    assert got_b.dtype == np.int32
    with pytest.raises(InputError, match=r"argument 1: expected 4xi32, got 4xf64 \(float64\)"):
        module.swap(np.zeros((4, 2), np.float32), [0.5, 1, 2, 3])


def test_dynamic_dimensions_accept_any_size(module):
    x = np.ones((5, 3), np.float32)
    np.testing.assert_array_equal(module.ident(x), x)
    with pytest.raises(InputError, match=r"expected \?x3xf32, got 5x2xf32"):
        module.ident(np.ones((5, 2), np.float32))


@pytest.mark.parametrize("value", [np.float32(1.5), 1.5, np.array(1.5, np.float32)])
def test_rank0_tensors_take_scalars(module, value):
    got = module.scalar(value)
    assert got.shape == () and got.dtype == np.float32 and float(got) == 1.5


def test_non_contiguous_arrays_are_copied(module):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)[:, :3]   # a 3x3 view, not C-contiguous
    np.testing.assert_array_equal(module.ident(x), x)


def test_scalar_arguments_and_results(module):
    assert module.scale(3, 1.5) == 4.5
    assert module.scale(np.int32(2), np.float32(0.25)) == 0.5
    with pytest.raises(InputError, match="scale: argument 0: expected i32, got f64"):
        module.scale(1.5, 1.0)


def test_buffer_views_pass_through(module):
    device = module.device
    view = hal.BufferView(device.allocator.allocate_with_data(np.ones(3, np.float32).tobytes()),
                          (1, 3), hal.ElementType.f32)
    np.testing.assert_array_equal(module.ident(view), np.ones((1, 3), np.float32))


def test_arguments_are_allocated_on_the_modules_device(module):
    before = module.device.allocator.allocations
    module.swap(np.zeros((4, 2), np.float32), np.zeros(4, np.int32))
    assert module.device.allocator.allocations == before + 2


def test_loading_from_a_path(tmp_path):
    path = tmp_path / "api.vmfb"
    path.write_bytes(api_module())
    m = load(str(path), device=FakeDevice())
    assert m.scale(2, 2.0) == 4.0
    assert load(path, device=FakeDevice()).function_names[0] == "swap"


def test_malformed_abi_reflection_fails_at_load():
    with pytest.raises(VerificationError, match="export 'swap': malformed abi reflection"):
        load(api_module({"abi.args": "4xq32;4xi32"}), device=FakeDevice())
    with pytest.raises(VerificationError, match="abi.args lists 1 types, its calling convention "
                                                "0rr_rr takes 2 arguments"):
        load(api_module({"abi.args": "4xf32"}), device=FakeDevice())


def test_without_reflection_any_array_is_accepted():
    m = load(api_module({}), device=FakeDevice())
    b, a = m.swap(np.ones(2, np.int8), np.zeros((1, 1), np.float64))
    assert a.dtype == np.int8 and b.shape == (1, 1)


def test_raw_calls_use_vm_values(module):
    assert module.call_raw("scale", 2, 0.5) == [1.0]


def test_unknown_device_is_a_device_error():
    from irtk.errors import DeviceError
    with pytest.raises(DeviceError):
        load(api_module(), device="no-such-driver")


def test_a_broadcast_view_too_large_to_copy_is_an_input_error_naming_the_argument(module):
    huge = np.broadcast_to(np.float32(1), (10 ** 10 // 3, 3))   # 10^10 elements, no memory
    with pytest.raises(InputError, match=r"^ident: argument 0: 3333333333x3xf32 \(float32\) "
                                         r"is 9,999,999,999 elements \(37.3 GiB\), more than "
                                         r"this machine's memory"):
        module.ident(huge)
    small = np.broadcast_to(np.arange(3, dtype=np.float32), (4, 3))
    np.testing.assert_array_equal(module.ident(small), small)


def test_load_picks_a_device_that_runs_the_module():
    import irtk
    from irtk.runtime.module import default_device
    from irtk.vm import load_module
    source = "func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n" \
             "  %e = tensor.empty() : tensor<4xf32>\n" \
             "  %r = linalg.add ins(%a, %a : tensor<4xf32>, tensor<4xf32>) " \
             "outs(%e : tensor<4xf32>) -> tensor<4xf32>\n  return %r : tensor<4xf32>\n}\n"
    assert default_device(load_module(irtk.compile_str(source, target="cpu"))) == "local-task"
    assert default_device(load_module(irtk.compile_str(source, target="vulkan-spirv"))) == \
        "vulkan"
    assert default_device(load_module(irtk.compile_str(source, target="vulkan-spirv,cpu"))) == \
        "local-task"
    m = irtk.load(irtk.compile_str(source, target="cpu"))
    assert m.device.info.driver == "local-task"
    x = np.random.default_rng().standard_normal(4).astype(np.float32)
    np.testing.assert_allclose(m.f(x), 2 * x)


DOUBLE = """func.func @main(%a: tensor<8xf32>) -> tensor<8xf32> {
  %r = arith.addf %a, %a : tensor<8xf32>
  return %r : tensor<8xf32>
}
"""


def test_devices_describe_what_load_takes_and_the_profile_to_compile_for():
    import irtk
    rng = np.random.default_rng(11)
    x = rng.standard_normal(8).astype(np.float32)
    described = irtk.devices()
    assert {"local-sync", "local-task"} <= {d.uri for d in described}
    for d in described:
        target = "vulkan-spirv" if d.driver == "vulkan" else "cpu"
        assert (d.vulkan_target is not None) == (d.driver == "vulkan")
        data = irtk.compile_str(DOUBLE, target=target, vulkan_target=d.vulkan_target or "default")
        m = irtk.load(data, device=d.uri)
        np.testing.assert_array_equal(m.main(x), 2 * x)
        assert d.to_dict()["uri"] == d.uri


def test_lists_and_scalars_convert_arrays_of_another_dtype_say_how():
    import irtk
    m = irtk.load(irtk.compile_str(DOUBLE, target="cpu"), device="local-sync")
    values = np.random.default_rng(5).standard_normal(8)
    np.testing.assert_array_equal(m.main(list(values)), 2 * values.astype(np.float32))
    with pytest.raises(InputError, match=r"main: argument 0: expected 8xf32, got 8xf64 "
                                         r"\(float64\); convert it with \.astype\(np\.float32\)"):
        m.main(values)
    with pytest.raises(InputError, match=r"got 7xf64 \(float64\)$"):
        m.main(values[:7])


def test_help_shows_an_exports_arguments_with_shapes_and_element_types():
    import inspect
    import pydoc
    import irtk
    m = irtk.load(irtk.compile_str(DOUBLE, target="cpu"), device="local-sync")
    assert str(inspect.signature(m.main)) == "(arg0: '8xf32', /) -> '8xf32'"
    text = pydoc.render_doc(m.main, renderer=pydoc.plaintext)
    assert "main(arg0: '8xf32', /) -> '8xf32'" in text
    assert "Export 'main' of module" in text


def test_benchmark_times_calls_on_resident_inputs():
    import irtk
    for uri in ["local-task"] + [d.uri for d in irtk.devices() if d.driver == "vulkan"][:1]:
        target = "cpu" if uri.startswith("local") else "vulkan-spirv"
        m = irtk.load(irtk.compile_str(DOUBLE, target=target), device=uri)
        x = np.random.default_rng(3).standard_normal(8).astype(np.float32)
        (view,) = m.main.prepare([x])
        assert isinstance(view, hal.BufferView)    # uploaded once, passed to every call
        result = m.main.benchmark(x, repetitions=2, min_time=0.01, warmup=0)
        assert len(result.times) == 2 and all(n >= 1 for n in result.iterations)
        assert result.min_ms <= result.median_ms <= result.max_ms
        assert result.to_dict()["repetitions"] == 2


@pytest.mark.parametrize(("options", "message"), [
    ({"repetitions": 0}, "benchmark repetitions must be at least 1, got 0"),
    ({"min_time": -1.0}, "benchmark min time must be a number of seconds >= 0, got -1.0"),
    ({"min_time": float("nan")}, "benchmark min time must be a number of seconds >= 0"),
    ({"warmup": -2}, "benchmark warm-up calls must be at least 0, got -2"),
])
def test_benchmark_options_out_of_range_are_input_errors(options, message):
    import re
    import irtk
    m = irtk.load(irtk.compile_str(DOUBLE, target="cpu"), device="local-sync")
    with pytest.raises(InputError, match=re.escape(message)):
        m.main.benchmark(np.ones(8, np.float32), **options)
