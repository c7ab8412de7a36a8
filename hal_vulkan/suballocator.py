"""A first-fit free list over one memory block: the bookkeeping half of the allocator.

Pure Python and Vulkan-free so it can be tested on its own. Offsets and sizes are multiples of one
alignment (the device's storage-buffer offset alignment), so every offset handed out is a valid
descriptor offset and freed ranges coalesce without padding.
"""
from __future__ import annotations

import bisect


class RangeAllocator:
    """Hands out aligned sub-ranges of [0, capacity); freed neighbours merge."""

    def __init__(self, capacity: int, alignment: int) -> None:
        if alignment <= 0 or alignment & (alignment - 1):
            raise ValueError(f"alignment {alignment} is not a power of two")
        self.capacity = capacity
        self.alignment = alignment
        self._offsets: list[int] = [0] if capacity else []  # free ranges, sorted by offset
        self._sizes: list[int] = [capacity] if capacity else []
        self.used = 0

    def round(self, size: int) -> int:
        """The size actually reserved for a request of `size` bytes (at least one unit)."""
        a = self.alignment
        return max(a, (size + a - 1) // a * a)

    def allocate(self, size: int) -> int | None:
        """Offset of a free range of `round(size)` bytes, or None when no range is big enough."""
        size = self.round(size)
        for i, free in enumerate(self._sizes):
            if free >= size:
                offset = self._offsets[i]
                if free == size:
                    del self._offsets[i]
                    del self._sizes[i]
                else:
                    self._offsets[i] += size
                    self._sizes[i] -= size
                self.used += size
                return offset
        return None

    def free(self, offset: int, size: int) -> None:
        size = self.round(size)
        if offset < 0 or offset + size > self.capacity:
            raise ValueError(f"range [{offset}, {offset + size}) is outside the block")
        i = bisect.bisect_left(self._offsets, offset)
        if (i < len(self._offsets) and self._offsets[i] < offset + size) or \
                (i > 0 and self._offsets[i - 1] + self._sizes[i - 1] > offset):
            raise ValueError(f"range [{offset}, {offset + size}) is already free")
        self._offsets.insert(i, offset)
        self._sizes.insert(i, size)
        self.used -= size
        if i + 1 < len(self._offsets) and offset + size == self._offsets[i + 1]:
            self._sizes[i] += self._sizes.pop(i + 1)
            self._offsets.pop(i + 1)
        if i > 0 and self._offsets[i - 1] + self._sizes[i - 1] == offset:
            self._sizes[i - 1] += self._sizes.pop(i)
            self._offsets.pop(i)

    @property
    def is_empty(self) -> bool:
        return self.used == 0

    @property
    def largest_free(self) -> int:
        return max(self._sizes, default=0)
