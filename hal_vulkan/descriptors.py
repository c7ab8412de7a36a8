"""Descriptor writes for dispatch bindings: storage buffers and uniform texel buffers.

A binding's device range is checked against the device's limits here, when it is recorded (or
rebound), so a bad table entry is a DeviceError naming the limit rather than a validation
message or undefined behaviour. The write structs are filled in place through cffi: the `vulkan`
binding's generic struct constructors cost more than the Vulkan calls themselves.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import vulkan as vk

from irtk.errors import DeviceError
from irtk.hal.binding import ResolvedBinding
from hal_vulkan.status import check_result

if TYPE_CHECKING:
    from hal_vulkan.context import DeviceContext
    from hal_vulkan.executable import EntryPoint

# Texel-buffer bindings are read as R32G32B32A32_UINT texels (docs/codegen_spirv.md).
TEXEL_BYTES = 16


def _write(writes: Any, i: int, dst_set: Any, number: int, kind: int) -> Any:
    """`writes[i]`, set up for one descriptor of `kind` at binding `number` of `dst_set` (NULL
    for a push descriptor)."""
    write = writes[i]
    write.sType = vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET
    write.dstSet = dst_set
    write.dstBinding = number
    write.descriptorCount = 1
    write.descriptorType = kind
    return write


def fill_descriptor_write(context: DeviceContext, infos: Any, writes: Any, i: int, dst_set: Any,
                          number: int, resolved: ResolvedBinding, what: str) -> None:
    """Fill `writes[i]` with a storage-buffer write of binding `number` and the `infos[i]` it
    points at."""
    offset, rng = descriptor_range(context, resolved, what)
    info = infos[i]
    info.buffer = resolved.buffer.vk_buffer
    info.offset = offset
    info.range = rng
    _write(writes, i, dst_set, number, vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER).pBufferInfo = \
        infos + i


def binding_ranges(context: DeviceContext, entry: EntryPoint, number: int,
                   resolved: ResolvedBinding, what: str) -> list[tuple[int, int]]:
    """The (device offset, range) pairs binding `number` of `entry` is bound with, checked
    against the device's limits: a storage buffer's, a texel view's, or one per texel window.
    Recording and a direct binding's check both go through here."""
    if number in entry.texel_windows:
        count, texels = entry.texel_windows[number]
        return window_ranges(context, resolved, count, texels, what)
    if number in entry.texel_bindings:
        return [texel_range(context, resolved, what)]
    return [descriptor_range(context, resolved, what)]


def fill_texel_write(context: DeviceContext, recording: Any, views: Any, view: int, writes: Any,
                     i: int, dst_set: Any, number: int, ranges: list[tuple[int, int]],
                     resolved: ResolvedBinding) -> int:
    """Fill `writes[i]` with a uniform-texel-buffer write of binding `number`: a view per range
    (`binding_ranges`) made for `recording` (which owns them: `Recording.buffer_view`), kept in
    `views` from slot `view` on. Returns the next free slot."""
    buffer = resolved.buffer.vk_buffer
    for k, (offset, size) in enumerate(ranges):
        views[view + k] = recording.buffer_view(buffer, offset, size)
    write = _write(writes, i, dst_set, number, vk.VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER)
    write.descriptorCount = len(ranges)
    write.pTexelBufferView = views + view
    return view + len(ranges)


def create_texel_view(context: DeviceContext, buffer: Any, offset: int, size: int) -> Any:
    """A new R32G32B32A32_UINT VkBufferView of `size` bytes at `offset` of `buffer`."""
    # A struct per view, not one shared by the module: devices record under their own
    # locks, so two devices may make views at once.
    info = vk.ffi.new("VkBufferViewCreateInfo*")
    info.sType = vk.VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO
    info.format = vk.VK_FORMAT_R32G32B32A32_UINT
    info.buffer, info.offset, info.range = buffer, offset, size
    view = vk.ffi.new("VkBufferView*")
    check_result("vkCreateBufferView",
                 vk.lib.vkCreateBufferView(context.handle, info, vk.ffi.NULL, view))
    context.tracker.created("VkBufferView")
    return view[0]


def _aligned_offset(context: DeviceContext, ref: ResolvedBinding, limit: str, what: str) -> int:
    """The binding's device offset, which must be a multiple of the limit `limit`."""
    align = int(context.physical.limits[limit])
    offset = ref.buffer.device_offset(ref.offset)
    if offset % align:
        raise DeviceError(f"{what}: offset {ref.offset} is not a multiple of {limit} "
                          f"({align}) of device '{context.info.name}'")
    return offset


def descriptor_range(context: DeviceContext, ref: ResolvedBinding, what: str) -> tuple[int, int]:
    """(device offset, range) of a storage-buffer binding, checked against the limits."""
    offset = _aligned_offset(context, ref, "minStorageBufferOffsetAlignment", what)
    max_range = int(context.physical.limits["maxStorageBufferRange"])
    if ref.length > max_range:
        raise DeviceError(f"{what}: binding of {ref.length} bytes exceeds maxStorageBufferRange "
                          f"({max_range}) of device '{context.info.name}'")
    if ref.length == 0:
        # A descriptor needs a non-zero range; the shader must not touch an empty binding, so
        # point it at the buffer's own first bytes (every buffer owns at least 16).
        if offset + 4 > ref.buffer.resource.block.size:
            offset = ref.buffer.device_offset(0)
        return offset, 4
    # Shaders address storage buffers in 32-bit words (sub-word elements are packed); a range
    # that ends mid-word would hide that word's elements under robust buffer access. Every
    # buffer owns its range rounded up to the allocator's alignment, so the word is its own.
    words = -(-ref.length // 4) * 4
    resource = ref.buffer.resource
    if offset + words <= resource.offset + resource.reserved:
        return offset, words
    return offset, ref.length


def texel_range(context: DeviceContext, ref: ResolvedBinding, what: str) -> tuple[int, int]:
    """(device offset, range) of a texel-buffer binding: whole 16-byte texels, checked against
    the limits. A range that ends mid-texel is rounded up into the buffer's own reserved bytes
    (buffers own their size rounded up to at least 16 bytes), as storage ranges are to words."""
    offset = _aligned_offset(context, ref, "minTexelBufferOffsetAlignment", what)
    if ref.length == 0:
        # A view needs at least one texel; point it at the buffer's own first one.
        return ref.buffer.device_offset(0), TEXEL_BYTES
    max_texels = int(context.physical.limits["maxTexelBufferElements"])
    texels = -(-ref.length // TEXEL_BYTES)
    if texels > max_texels:
        raise DeviceError(f"{what}: binding of {ref.length} bytes is {texels} texels of 16 "
                          f"bytes, more than maxTexelBufferElements ({max_texels}) of device "
                          f"'{context.info.name}'")
    # The offset is texel-aligned and the buffer's reservation ends on an aligned boundary, so
    # the rounded range stays inside the buffer's own bytes.
    return offset, texels * TEXEL_BYTES


def window_ranges(context: DeviceContext, ref: ResolvedBinding, count: int, texels: int,
                  what: str) -> list[tuple[int, int]]:
    """(device offset, range) of each of the `count` window views of a texel-buffer binding:
    view k holds `texels` texels from texel k * texels / 2 (docs/codegen_spirv.md, "Texel
    windows"), cut at the binding's end (rounded up to whole texels as in `texel_range`). A
    window past the end, which the shader only reaches through an out-of-bounds access, views
    the binding's start instead: every view stays inside the binding."""
    align_name = "minTexelBufferOffsetAlignment"
    offset = _aligned_offset(context, ref, align_name, what)
    half = texels // 2 * TEXEL_BYTES
    align = int(context.physical.limits[align_name])
    if half % align:
        raise DeviceError(f"{what}: texel windows start every {half} bytes, not a multiple of "
                          f"{align_name} ({align}) of device '{context.info.name}'")
    max_texels = int(context.physical.limits["maxTexelBufferElements"])
    if texels > max_texels:
        raise DeviceError(f"{what}: texel windows of {texels} texels are more than "
                          f"maxTexelBufferElements ({max_texels}) of device "
                          f"'{context.info.name}'")
    if ref.length == 0:
        return [(ref.buffer.device_offset(0), TEXEL_BYTES)] * count
    size = -(-ref.length // TEXEL_BYTES) * TEXEL_BYTES
    out = []
    for k in range(count):
        start = k * half if k * half < size else 0
        out.append((offset + start, min(texels * TEXEL_BYTES, size - start)))
    return out
