"""Descriptor-set-0 binding variables, shared by `ShaderInterface` and the elementwise generator.

A binding is read through a `StorageBuffer` variable (a `Block` struct of one runtime array, any
element type and stride; several variables may alias one binding, as views of different
element types), or, on profiles with texel-buffer loads, through a uniform texel buffer of
R32G32B32A32_UINT texels (docs/codegen_spirv.md, "Texel-buffer loads"), or through an array
of such views, windows of the binding that overlap by half ("Texel windows"): the index into
the array must be dynamically uniform (capability UniformTexelBufferArrayDynamicIndexing).
"""
from __future__ import annotations

from spirv.tables import Capability, Decoration, Dim, ImageFormat, Op as SpvOp, StorageClass

from .emitter import Emitter


def storage_buffer(e: Emitter, binding: int, element: int, stride: int, name: str, *,
                   writable: bool = True, readable: bool = True) -> int:
    """A StorageBuffer variable over `binding` as a runtime array of `element`."""
    b = e.b
    block = b.type_struct([b.type_runtime_array(element, stride=stride)])
    b.decorate(block, Decoration.Block)
    b.member_decorate(block, 0, Decoration.Offset, 0)
    if not writable:
        b.member_decorate(block, 0, Decoration.NonWritable)
    elif not readable:
        b.member_decorate(block, 0, Decoration.NonReadable)
    var = b.variable(b.type_pointer(StorageClass.StorageBuffer, block), StorageClass.StorageBuffer)
    _bind(e, var, binding, name)
    return var


def texel_buffer(e: Emitter, binding: int, name: str) -> int:
    """A uniform texel buffer variable over `binding` (capability SampledBuffer)."""
    b = e.b
    b.capability(Capability.SampledBuffer)
    var = b.variable(b.type_pointer(StorageClass.UniformConstant, _texel_image(e)),
                     StorageClass.UniformConstant)
    _bind(e, var, binding, name)
    return var


def texel_window_array(e: Emitter, binding: int, count: int, name: str) -> int:
    """An array of `count` uniform texel buffers over `binding` (its windows)."""
    b = e.b
    b.capability(Capability.SampledBuffer)
    b.capability(Capability.UniformTexelBufferArrayDynamicIndexing)
    if e.b.version < (1, 5):
        b.extension("SPV_EXT_descriptor_indexing")
    array = b.type_array(_texel_image(e), count)
    var = b.variable(b.type_pointer(StorageClass.UniformConstant, array),
                     StorageClass.UniformConstant)
    _bind(e, var, binding, name)
    return var


def window_image(e: Emitter, var: int, window: int) -> int:
    """The image of window `window` (u32, dynamically uniform) of a `texel_window_array`
    variable."""
    image_type = _texel_image(e)
    pointer = e.op(SpvOp.AccessChain, e.b.type_pointer(StorageClass.UniformConstant, image_type),
                   var, window)
    return e.op(SpvOp.Load, image_type, pointer)


def fetch(e: Emitter, var: int, texel: int) -> int:
    """Texel `texel` (u32) of a texel-buffer variable: four words (uvec4)."""
    return fetch_image(e, e.op(SpvOp.Load, _texel_image(e), var), texel)


def fetch_image(e: Emitter, image: int, texel: int) -> int:
    """Texel `texel` (u32) of a loaded texel-buffer image: four words (uvec4)."""
    return e.op(SpvOp.ImageFetch, e.b.type_vector(e.u32, 4), image, texel)


def fetch_word(e: Emitter, var: int, word: int) -> int:
    """Word `word` (u32) of a texel-buffer variable: component word % 4 of texel word / 4."""
    texel = fetch(e, var, e.op(SpvOp.ShiftRightLogical, e.u32, word, e.u32c(2)))
    return e.op(SpvOp.VectorExtractDynamic, e.u32, texel,
                e.op(SpvOp.BitwiseAnd, e.u32, word, e.u32c(3)))


def _texel_image(e: Emitter) -> int:
    return e.b.type_image(e.u32, Dim.Buffer, 1, ImageFormat.Unknown)


def _bind(e: Emitter, var: int, binding: int, name: str) -> None:
    e.b.decorate(var, Decoration.DescriptorSet, 0)
    e.b.decorate(var, Decoration.Binding, binding)
    e.b.name(var, name)
