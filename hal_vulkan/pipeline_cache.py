"""A VkPipelineCache persisted on disk, so shader compilation happens once per machine.

The file lives in `$IRTK_CACHE_DIR/vulkan`, else `$XDG_CACHE_HOME/irtk/vulkan`, else
`~/.cache/irtk/vulkan`, named after the device UUID and driver version (a driver update starts
a fresh cache). The driver's blob is wrapped in irtk's own header with a SHA-256 of the payload
and checked against the device's pipelineCacheUUID before Vulkan sees it: a truncated or
corrupt file (or one from another driver) is ignored, never fed to the driver. Writes go to a
temporary file that replaces the old one, so concurrent processes never read half a file.
"""
from __future__ import annotations

import hashlib
import os
import struct
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import vulkan as vk

from irtk.hal import cache as hal_cache
from hal_vulkan.status import call, check_result

if TYPE_CHECKING:
    from hal_vulkan.context import DeviceContext

MAGIC = b"IRTKVKPC"
_HEADER = struct.Struct("<8sI32s")  # magic, payload length, sha256(payload)


def cache_dir() -> Path:
    return hal_cache.cache_dir("vulkan")


def _unwrap(blob: bytes, pipeline_cache_uuid: bytes) -> bytes | None:
    """The driver payload of a cache file, or None when the file is not trustworthy."""
    if len(blob) < _HEADER.size:
        return None
    magic, length, digest = _HEADER.unpack_from(blob, 0)
    payload = blob[_HEADER.size:]
    if magic != MAGIC or length != len(payload) or hashlib.sha256(payload).digest() != digest:
        return None
    # Vulkan's own header: length, version (1), vendorID, deviceID, pipelineCacheUUID.
    if len(payload) < 32:
        return None
    header_len, version = struct.unpack_from("<II", payload, 0)
    if header_len < 32 or version != 1 or payload[16:32] != pipeline_cache_uuid:
        return None
    return payload


class PipelineCache:
    def __init__(self, context: DeviceContext) -> None:
        self.context = context
        pd = context.physical
        self.path = cache_dir() / (f"{pd.device_uuid.hex()}-{pd.vendor_id:04x}-"
                                   f"{pd.device_id:04x}-{pd.driver_version:08x}.bin")
        initial = self._load(pd.pipeline_cache_uuid)
        self.handle = None
        if initial:
            try:
                self.handle = self._create(initial)
            except Exception:  # a driver that still dislikes the data: start empty
                self.handle = None
        if self.handle is None:
            self.handle = self._create(b"")
        self._saved_size = len(initial or b"")

    def _create(self, initial: bytes) -> Any:
        keep = vk.ffi.from_buffer(initial) if initial else None
        info = vk.VkPipelineCacheCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
            initialDataSize=len(initial), pInitialData=keep)
        handle = call(vk.vkCreatePipelineCache, self.context.handle, info, None)
        self.context.tracker.created("VkPipelineCache")
        return handle

    def _load(self, uuid: bytes) -> bytes | None:
        try:
            blob = self.path.read_bytes()
        except OSError:
            return None
        return _unwrap(blob, uuid)

    def data(self) -> bytes:
        size = vk.ffi.new("size_t*")
        lib, device = vk.lib, self.context.handle
        check_result("vkGetPipelineCacheData",
                     lib.vkGetPipelineCacheData(device, self.handle, size, vk.ffi.NULL))
        buf = vk.ffi.new("char[]", size[0])
        check_result("vkGetPipelineCacheData",
                     lib.vkGetPipelineCacheData(device, self.handle, size, buf))
        return bytes(vk.ffi.buffer(buf, size[0]))

    def save(self) -> None:
        """Write the cache when it grew; a read-only or full disk only costs the speed-up."""
        if self.handle is None:
            return
        payload = self.data()
        if len(payload) == self._saved_size:
            return
        blob = _HEADER.pack(MAGIC, len(payload), hashlib.sha256(payload).digest()) + payload
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".tmp-", suffix=".bin")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(blob)
                os.replace(tmp, self.path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            return
        self._saved_size = len(payload)

    def destroy(self) -> None:
        if self.handle is None:
            return
        try:
            self.save()
        finally:
            vk.vkDestroyPipelineCache(self.context.handle, self.handle, None)
            self.context.tracker.destroyed("VkPipelineCache")
            self.handle = None
