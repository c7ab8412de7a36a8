"""Limits on what one call, one loaded module and one input may use.

A module file, an input and a program are untrusted: a ten-instruction module can otherwise
allocate until the machine swaps, loop for ever (also inside `__init`, at load) or ask for an
input of 10^20 elements. `Limits` bounds each of those, per invocation and per context, and
the error says which limit ran out and where.

Memory is counted as *live bytes*: an allocation charges the invocation that made it and its
context, and the bytes are given back when the object is freed (a finalizer), so a loop that
allocates and drops a buffer each iteration stays within any limit, while one that keeps them
(in a list, a global) is stopped. Two resources are counted separately: the VM's own heap
(`!vm.buffer` bytes and `!vm.list` slots) and device memory allocated through the `hal`
module (`hal.allocator.allocate`, buffer views' storage).

The accounting reaches allocating ops through `current()`, a per-thread pointer that the
interpreter sets while it runs an invocation's code (the ops themselves are closures decoded
once and know nothing of the call that runs them).
"""
from __future__ import annotations

import os
import resource
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Callable, TypeVar

GiB = 1 << 30
LIST_SLOT_BYTES = 8   # what one `!vm.list` slot is charged (a pointer)
T = TypeVar("T")
CHECK_EVERY = 4096    # branches and calls between two looks at the step total and the clock


def host_memory_bytes() -> int:
    """The memory this process may use: physical memory, lowered by an address-space rlimit or
    a cgroup limit where one is set. Inputs and default limits are measured against it."""
    limit = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        limit = min(limit, soft)
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():
            limit = min(limit, int(text))
    return limit


def format_bytes(count: int) -> str:
    """1536 -> '1.5 KiB': sizes in messages, with the exact count where it is small."""
    if count < 1024:
        return f"{count} bytes"
    value = float(count)
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        value /= 1024
        if value < 1024 or unit == "EiB":
            return f"{value:.1f} {unit}" if value < 1e6 else f"{value:.3g} {unit}"
    raise AssertionError("unreachable")


def _default_bytes(fraction: float) -> int:
    return max(GiB, int(host_memory_bytes() * fraction))


@dataclass(frozen=True)
class Limits:
    """What one invocation (a call, or `__init` at load) and one context may use.

    `steps`: branches, calls and fused straight-line runs per invocation (None: no limit).
    `seconds`: wall time per invocation, waiting for the device included (None: no limit).
    `heap_bytes_per_call` / `heap_bytes`: live VM heap bytes per invocation / per context.
    `device_bytes_per_call` / `device_bytes`: live device memory allocated through the `hal`
    module per invocation / per context. The memory defaults are fractions of the host's
    memory (`host_memory_bytes`), so an out-of-control module fails before the machine does.
    """

    steps: int | None = None
    seconds: float | None = None
    heap_bytes_per_call: int | None = None
    heap_bytes: int | None = None
    device_bytes_per_call: int | None = None
    device_bytes: int | None = None

    def resolved(self) -> "Limits":
        """These limits with the memory defaults filled in (from the host's memory now)."""
        return Limits(
            steps=self.steps, seconds=self.seconds,
            heap_bytes_per_call=_pick(self.heap_bytes_per_call, 0.25),
            heap_bytes=_pick(self.heap_bytes, 0.5),
            device_bytes_per_call=_pick(self.device_bytes_per_call, 0.5),
            device_bytes=_pick(self.device_bytes, 0.75))


def _pick(value: int | None, fraction: float) -> int:
    return _default_bytes(fraction) if value is None else value


class LimitExceeded(Exception):
    """A limit ran out inside an op; the interpreter adds where (function and offset)."""


class Meter:
    """Live bytes of one resource for one invocation or context, against a limit."""

    __slots__ = ("name", "limit", "used", "option", "__weakref__")

    def __init__(self, name: str, limit: int, option: str) -> None:
        self.name = name          # "call 'main'" / "module 'm'"
        self.limit = limit
        self.used = 0
        self.option = option      # the Limits field that sets it, for the message

    def release(self, count: int) -> None:
        self.used -= count


def _give_back(meters: tuple[Meter, ...], count: int) -> None:
    for meter in meters:
        meter.used -= count


class Budget:
    """One invocation's limits: its steps and deadline, and its memory meters (each paired
    with its context's). Made when the invocation starts; the loop asks `check_time`."""

    __slots__ = ("deadline", "seconds", "steps_left", "granted", "fuel", "heap", "device")

    def __init__(self, limits: Limits, name: str, context_heap: Meter,
                 context_device: Meter) -> None:
        self.seconds = limits.seconds
        # Steps are granted CHECK_EVERY at a time, so the loop's per-branch cost stays one
        # decrement; the step total and the clock are looked at when a grant is spent.
        self.steps_left: float = float("inf") if limits.steps is None else limits.steps
        self.granted = min(CHECK_EVERY, self.steps_left)
        self.fuel = self.granted
        self.deadline = None if limits.seconds is None else time.monotonic() + limits.seconds
        assert limits.heap_bytes_per_call is not None and limits.device_bytes_per_call is not None
        self.heap = (Meter(f"call '{name}'", limits.heap_bytes_per_call, "heap_bytes_per_call"),
                     context_heap)
        self.device = (Meter(f"call '{name}'", limits.device_bytes_per_call,
                             "device_bytes_per_call"), context_device)

    def time_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline


def _reserve(meters: tuple[Meter, ...], count: int, what: str, resource_name: str) -> None:
    for meter in meters:
        if meter.used + count > meter.limit:
            raise LimitExceeded(
                f"out of {resource_name}: {what} would bring {meter.name} to "
                f"{format_bytes(meter.used + count)} live, over its limit of "
                f"{format_bytes(meter.limit)} (Limits.{meter.option})")
    for meter in meters:
        meter.used += count


def _charged(meters: tuple[Meter, ...], count: int, what: str, resource_name: str,
             make: Callable[[], T]) -> T:
    """`make()`, after checking and charging `count` bytes; given back when it is freed."""
    _reserve(meters, count, what, resource_name)
    try:
        owner = make()
    except BaseException:
        _give_back(meters, count)
        raise
    _watch(owner, meters, count)
    return owner


# Weak references whose callbacks give charged bytes back; kept here so they outlive the
# call that made them. (A bare weakref with a callback costs a fifth of `weakref.finalize`,
# which every allocation of every call would pay.)
_watched: set[weakref.ref] = set()


def _watch(owner: object, meters: tuple[Meter, ...], count: int) -> None:
    def freed(ref: weakref.ref) -> None:
        _watched.discard(ref)
        _give_back(meters, count)
    _watched.add(weakref.ref(owner, freed))


_current = threading.local()


def current() -> Budget | None:
    """The budget of the invocation this thread runs now (None outside VM code)."""
    return getattr(_current, "budget", None)


def enter(budget: Budget | None) -> Budget | None:
    """Make `budget` this thread's current one; returns the previous, for `leave`."""
    previous = getattr(_current, "budget", None)
    _current.budget = budget
    return previous


def leave(previous: Budget | None) -> None:
    _current.budget = previous


def heap_allocation(count: int, what: str, make: Callable[[], T]) -> T:
    """`make()` an object holding `count` bytes of VM heap, charged to the running invocation
    and its context (nothing is charged outside VM code)."""
    budget = current()
    if budget is None or count <= 0:
        return make()
    return _charged(budget.heap, count, what, "VM heap memory", make)


def device_allocation(count: int, what: str, make: Callable[[], T]) -> T:
    """`make()` a device buffer of `count` bytes, charged like `heap_allocation`."""
    budget = current()
    if budget is None or count <= 0:
        return make()
    return _charged(budget.device, count, what, "device memory", make)
