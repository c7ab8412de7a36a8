"""Pipelines shared by executables made from the same bytes, and kept a while after the last.

Loading a module creates its executables; dropping it destroyed their pipelines, and the next
load of the same module compiled them again. That costs the compile, and drivers keep memory
per compiled pipeline that destroying it does not give back (lavapipe about 0.27 MB each;
SwiftShader's pipeline cache gains an entry per creation), so a process that loads and drops
a module in a loop — a server reloading a model, a test suite — grew without bound.

An entry, keyed by the sha256 of the executable's bytes (which fix every shader, layout and
entry point), holds the `ExecutableResource` with its pipelines. Each `VulkanExecutable` made
from those bytes holds an `ExecutableUse` of it: a resource of its own whose destruction (by
`release()` or the garbage collector, through the device's usual retire path, so no Vulkan
call ever runs in a finalizer) ends the use. An entry nobody uses stays among the `capacity`
most recently released ones, so a reload finds it; older ones are retired (destroyed once no
submission uses them), and `trim()` retires them all.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from hal_vulkan.resource import Resource

if TYPE_CHECKING:
    from hal_vulkan.context import DeviceContext

DEFAULT_CAPACITY = 16   # idle executables kept per device


@dataclass
class _Entry:
    resource: Resource
    entry_points: list[Any]
    users: int = 0


class ExecutableUse(Resource):
    """One executable's claim on a cache entry; destroying it ends the claim."""

    kind = "executable use"

    def __init__(self, cache: "ExecutableCache", key: bytes) -> None:
        super().__init__()
        self.cache = cache
        self.key = key

    def destroy_handles(self) -> None:
        self.cache._unuse(self.key)


class ExecutableCache:
    def __init__(self, context: DeviceContext, capacity: int = DEFAULT_CAPACITY) -> None:
        self.context = context
        self.capacity = capacity
        self._entries: dict[bytes, _Entry] = {}
        self._idle: OrderedDict[bytes, None] = OrderedDict()   # oldest first

    def acquire(self, key: bytes, build: Callable[[], tuple[Resource, list[Any]]]
                ) -> tuple[Resource, list[Any], ExecutableUse, bool]:
        """The entry for `key` — built by `build()` (which returns a resource not yet adopted
        and its entry points) when there is none — and a new use of it; the last item says
        whether it was built now. The caller holds the device lock."""
        entry = self._entries.get(key)
        built = entry is None
        if entry is None:
            resource, entry_points = build()
            self.context.adopt(resource)
            entry = self._entries[key] = _Entry(resource, entry_points)
        else:
            self._idle.pop(key, None)
        entry.users += 1
        use = ExecutableUse(self, key)
        self.context.adopt(use)
        return entry.resource, entry.entry_points, use, built

    def _unuse(self, key: bytes) -> None:
        """Called under the device lock when an `ExecutableUse` is destroyed."""
        entry = self._entries.get(key)
        if entry is None:
            return   # the device is being released: its resources go with it
        entry.users -= 1
        if entry.users == 0:
            self._idle[key] = None
            self._evict(self.capacity)

    def _evict(self, keep: int) -> None:
        while len(self._idle) > keep:
            key, _ = self._idle.popitem(last=False)
            self.context.retire(self._entries.pop(key).resource)

    def trim(self) -> None:
        """Retire every entry no executable uses (the caller holds the device lock)."""
        self._evict(0)

    def idle_count(self) -> int:
        return len(self._idle)

    def clear(self) -> None:
        """Forget every entry (the device is being released and destroys them itself)."""
        self._entries.clear()
        self._idle.clear()
