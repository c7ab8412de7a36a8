"""`dense_resource` constants with their blobs in the file's `dialect_resources` section, as
torch-mlir writes every weight: each element type comes through exactly, on the CPU and on
Vulkan; a missing, malformed or short blob is a located error."""
from __future__ import annotations

import numpy as np
import pytest

import irtk
from tests.conftest import target_for, vulkan_device_uris

RNG = np.random.default_rng()


def program(values: np.ndarray, mlir_type: str, handle: str = "torch_tensor_w",
            blob: str | None = None) -> str:
    shape = "x".join(str(d) for d in values.shape)
    tensor = f"tensor<{shape}x{mlir_type}>"
    if blob is None:
        raw = (values.astype(bool).astype(np.uint8) if mlir_type == "i1" else values).tobytes()
        blob = "0x" + (b"\x04\x00\x00\x00" + raw).hex().upper()
    return f"""func.func @main(%x: {tensor}) -> ({tensor}, {tensor}) {{
  %w = arith.constant dense_resource<{handle}> : {tensor}
  %v = arith.constant dense_resource<{handle}> : {tensor}
  return %w, %v : {tensor}, {tensor}
}}

{{-#
  dialect_resources: {{
    builtin: {{
      {handle}: "{blob}"
    }}
  }}
#-}}
"""


def _values(mlir_type: str) -> np.ndarray:
    shape = (3, 5)
    if mlir_type == "i1":
        return RNG.integers(0, 2, shape).astype(bool)
    if mlir_type.startswith("i"):
        dtype = np.dtype(f"int{mlir_type[1:]}")
        info = np.iinfo(dtype)
        return RNG.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    dtype = {"f16": np.float16, "f32": np.float32, "f64": np.float64}[mlir_type]
    return (RNG.standard_normal(shape) * 100).astype(dtype)


@pytest.mark.parametrize("mlir_type", ["f16", "f32", "f64", "i1", "i8", "i16", "i32", "i64"])
def test_every_element_type_comes_through_exactly(mlir_type):
    values = _values(mlir_type)
    m = irtk.load(irtk.compile_str(program(values, mlir_type), target="cpu",
                                   demote_f64=False), "local-sync")
    w, v = m.main(values)
    assert w.dtype == values.dtype
    np.testing.assert_array_equal(w, values)
    np.testing.assert_array_equal(v, values)


def test_f64_blobs_are_demoted_to_f32_by_default():
    values = _values("f64")
    m = irtk.load(irtk.compile_str(program(values, "f64"), target="cpu"), "local-sync")
    w, _ = m.main(values.astype(np.float32))
    assert w.dtype == np.float32
    np.testing.assert_array_equal(w, values.astype(np.float32))


def test_bf16_blobs_decode_to_their_values():
    bits = RNG.integers(0, 1 << 15, (2, 4), dtype=np.uint16)   # positive, finite bf16
    values = (bits.astype(np.uint32) << 16).view(np.float32)
    blob = "0x04000000" + bits.tobytes().hex()
    source = program(values, "bf16", blob=blob)
    from irtk.compiler.frontend import parse_mlir
    module, _ = parse_mlir(source)
    from xdsl.dialects.builtin import DenseIntOrFPElementsAttr
    consts = [op for op in module.walk() if op.name == "arith.constant"]
    attr = consts[0].properties["value"]
    assert isinstance(attr, DenseIntOrFPElementsAttr)
    assert attr.data.data == bits.tobytes()


@pytest.mark.parametrize("uri", vulkan_device_uris())
def test_weights_from_blobs_on_vulkan(uri):
    values = _values("f32")
    source = program(values, "f32").replace(
        "return %w, %v", "%s = arith.addf %x, %w : tensor<3x5xf32>\n  return %s, %v")
    m = irtk.load(irtk.compile_str(source, target=target_for(uri)), uri)
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    s, v = m.main(x)
    np.testing.assert_array_equal(s, x + values)
    np.testing.assert_array_equal(v, values)


def test_the_same_handle_parses_in_every_compile():
    """xDSL's own resource storage is process-wide and renames a handle it has seen; irtk
    keeps blobs per parse, so compiling the same model twice gives the same constants."""
    values = _values("i32")
    for _ in range(3):
        m = irtk.load(irtk.compile_str(program(values, "i32"), target="cpu"), "local-sync")
        np.testing.assert_array_equal(m.main(values)[0], values)


@pytest.mark.parametrize(("blob", "message"), [
    ("0x0400000000", "holds 1 byte after its 4-byte alignment header; tensor<1x2xi32> needs 8"),
    ("0x0400", "blob 'torch_tensor_w' is shorter than its 4-byte alignment header"),
    ("0x04000000ZZ000000ZZ000000", "blob 'torch_tensor_w' is not hexadecimal"),
    ("04000000", 'must be a hex string "0x..." of whole bytes'),
    ("0x040", 'must be a hex string "0x..." of whole bytes'),
])
def test_bad_blobs_are_located_errors(blob, message):
    source = program(np.zeros((1, 2), np.int32), "i32", blob=blob)
    with pytest.raises(irtk.ParseError) as info:
        irtk.compile_str(source, target="cpu", filename="model.mlir")
    text = str(info.value)
    assert message in text, text
    where = "2:38" if "needs" in message else "10:23"   # at the use, or at the blob itself
    assert text.startswith(f"model.mlir:{where}: error: "), text
    assert text.rstrip().endswith("^"), text   # the source line and a caret


def test_a_missing_blob_is_an_error_at_its_use():
    source = program(np.zeros((1, 2), np.int32), "i32").replace(
        "%v = arith.constant dense_resource<torch_tensor_w>",
        "%v = arith.constant dense_resource<torch_tensor_other>")
    with pytest.raises(irtk.ParseError) as info:
        irtk.compile_str(source, target="cpu", filename="model.mlir")
    assert str(info.value).startswith("model.mlir:3:38: error: dense_resource "
                                      "'torch_tensor_other' has no blob"), str(info.value)
