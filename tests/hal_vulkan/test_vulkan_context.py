"""The device context: what a device's objects share in place of the device.

The lifetimes it keeps are checked on fakes, without Vulkan: a retired resource is destroyed
once the queue has completed the last submission that used it, a finalizer only queues a
resource and the next `check` destroys it, and a released context destroys everything it owns
once and refuses further calls. On each Vulkan device: every object the device makes holds the
device's context, never the device.
"""
from __future__ import annotations

import gc
import threading
from types import SimpleNamespace

import pytest

from irtk.errors import DeviceError
from hal_vulkan.context import DeviceContext
from hal_vulkan.resource import Resource, release_when_collected
from hal_vulkan.tracker import ObjectTracker

from tests.hal_vulkan.kernels import mul_add_executable


class _Queue:
    """The queue as the context sees it: the newest completed serial, and what is in flight."""

    def __init__(self) -> None:
        self.completed = 0
        self.in_flight: list[object] = []

    def poll(self) -> int:
        return self.completed


class _Resource(Resource):
    kind = "test"

    def __init__(self, name: str, destroyed: list[str], last_use: int = 0) -> None:
        super().__init__()
        self.name, self.destroyed_log, self.last_use = name, destroyed, last_use

    def destroy_handles(self) -> None:
        self.destroyed_log.append(self.name)


class _Owner:
    """A HAL object whose collection releases a resource."""


def _context(queue: _Queue) -> DeviceContext:
    physical = SimpleNamespace(info=SimpleNamespace(name="test device"))
    return DeviceContext(handle=None, physical=physical, log=None,  # type: ignore[arg-type]
                         tracker=ObjectTracker(), lock=threading.RLock(),
                         queue=queue, command_pool=None,  # type: ignore[arg-type]
                         update_after_bind=False, push_descriptors=False,
                         push_descriptor_set=None)


def test_a_retired_resource_is_destroyed_once_its_last_submission_completed():
    queue, destroyed = _Queue(), []
    context = _context(queue)
    idle, busy = _Resource("idle", destroyed), _Resource("busy", destroyed, last_use=3)
    for r in (idle, busy):
        context.adopt(r)
    context.retire(idle)
    context.retire(busy)
    assert destroyed == ["idle"]
    queue.completed = 2
    context.collect()
    assert destroyed == ["idle"]
    queue.completed = 3
    context.check()
    assert destroyed == ["idle", "busy"]


def test_a_finalizer_only_queues_its_resource_and_the_next_check_destroys_it():
    context, destroyed = _context(_Queue()), []
    owner = _Owner()
    resource = _Resource("dropped", destroyed)
    context.adopt(resource)
    release_when_collected(owner, resource, context.garbage)
    del owner
    gc.collect()
    assert destroyed == [] and list(context.garbage) == [resource]
    context.check()
    assert destroyed == ["dropped"] and not context.garbage


def test_a_released_context_destroys_what_it_owns_once_and_refuses_calls():
    queue, destroyed = _Queue(), []
    context = _context(queue)
    kept, in_flight = _Resource("kept", destroyed), _Resource("in flight", destroyed, 5)
    context.adopt(kept)
    context.adopt(in_flight)
    context.retire(in_flight)
    with context.lock:
        context.release_resources()
    assert sorted(destroyed) == ["in flight", "kept"]
    late = _Resource("late", destroyed)
    context.retire(late)  # after release: nothing more is destroyed
    queue.completed = 5
    context.collect()
    assert sorted(destroyed) == ["in flight", "kept"]
    with pytest.raises(DeviceError, match="device 'test device' was released"):
        context.check()


def test_every_object_a_device_makes_holds_its_context_not_the_device(device):
    objects = [device.allocator.allocate(64), device.create_semaphore(0),
               device.create_command_buffer(),
               device.create_executable("vulkan-spirv-fb", mul_add_executable())]
    for obj in objects:
        assert obj.context is device.context, obj
        assert not any(value is device for value in vars(obj).values()), obj
    for obj in objects:
        obj.release()
