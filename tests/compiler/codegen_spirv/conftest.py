"""Fixtures for the SPIR-V codegen tests: a seeded RNG and Vulkan devices to execute on.

Execution goes through the real HAL (`irtk.hal.registry` -> hal_vulkan) with the executable
packed by `pack_executable`, exactly as a compiled module would run. A device that cannot be
created (no hal_vulkan, no loader, no such ICD) skips its tests with the reason.
"""
from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np
import pytest

from irtk.compiler.codegen.spirv import SpirvKernel, compile_kernel, pack_executable
from irtk.compiler.kernel import Kernel
from irtk.compiler.targets import VULKAN_PROFILES, VulkanProfile
from irtk.types import scalar_type
from schemas import VULKAN_EXECUTABLE_FORMAT

from .reference import encode, from_storage, to_storage

DEVICES = ("swiftshader", "llvmpipe")
_POISON = 0xCD  # output bytes a kernel fails to write stay recognisable


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """Seeded from the test's id: reproducible, and different per test."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


@dataclass
class VulkanRunner:
    """Compiles kernels for a device's profile and runs them through the HAL."""

    name: str
    device: object
    profile: VulkanProfile

    def compile(self, kernel: Kernel, **options) -> SpirvKernel:
        return compile_kernel(kernel, self.profile, **options)

    def run(self, kernel: Kernel, inputs: list[np.ndarray],
            compiled: SpirvKernel | None = None, *, initial: list[np.ndarray] | None = None,
            params: list[int | float] | None = None, **options) -> list[np.ndarray]:
        """The kernel's outputs for `inputs` and `params`; outputs start as `initial`, or
        filled with 0xCD bytes. Values come back in the reference's form (int64/bool/float64)."""
        from irtk.hal.command_buffer import BindingRef
        from irtk.hal.semaphore import Fence

        sk = compiled or self.compile(kernel, **options)
        params = list(params or [])
        named = {p.name: params[k] for k, p in enumerate(kernel.params)}
        ranges = tuple(r if isinstance(r, int) else int(named[r]) for r in kernel.loop_ranges)

        def shape(o) -> tuple[int, ...]:
            return tuple(d if isinstance(d, int) else int(named[d]) for d in o.shape)
        dev = self.device
        executable = dev.create_executable(VULKAN_EXECUTABLE_FORMAT,
                                           pack_executable([sk], self.profile))
        buffers = {}
        for operand, data in zip(kernel.inputs, inputs):
            buffers[operand.binding] = dev.allocator.allocate_with_data(
                to_storage(data, operand.element_type) or bytes(4))
        for k, operand in enumerate(kernel.outputs):
            if initial is not None:
                raw = to_storage(initial[k], operand.element_type)
            else:
                raw = bytes([_POISON]) * len(to_storage(np.zeros(shape(operand)),
                                                        operand.element_type))
            buffers[operand.binding] = dev.allocator.allocate_with_data(raw or bytes(4))
        refs = [BindingRef(buffers[b], 0, buffers[b].size) for b, _ in sk.bindings]
        command_buffer = dev.create_command_buffer()
        command_buffer.dispatch(executable, executable.lookup(sk.entry_point),
                                _counts(sk, ranges), push_words(kernel, params), refs)
        command_buffer.finalize()
        semaphore = dev.create_semaphore(0)
        dev.queue_execute(Fence(), Fence([(semaphore, 1)]), [command_buffer])
        assert semaphore.wait(1, timeout=120.0), "dispatch did not finish"
        outputs = [from_storage(buffers[o.binding].read(), o.element_type, shape(o))
                   for o in kernel.outputs]
        command_buffer.release()
        executable.release()
        for buffer in buffers.values():
            buffer.release()
        return outputs


def _counts(sk: SpirvKernel, ranges: tuple[int, ...]) -> tuple[int, int, int]:
    """The launch: the compiled grid rule for the concrete ranges (static kernels: as given)."""
    if sk.grid is None or sk.workgroup_count != (0, 0, 0):
        return sk.workgroup_count
    return sk.grid.counts(ranges)


def push_words(kernel: Kernel, params: list[int | float]) -> list[int]:
    """Params as the u32 push-constant words `Kernel.param_offsets()` lays out."""
    words = [0] * (-(-kernel.push_constant_bytes // 4))
    for p, offset, value in zip(kernel.params, kernel.param_offsets(), params):
        if p.byte_size == 8:
            raw = np.array([value], scalar_type(p.type).storage_dtype).tobytes()
            words[offset // 4], words[offset // 4 + 1] = struct.unpack("<II", raw)
        elif scalar_type(p.type).is_float:     # its bits, in the low bits of the word
            words[offset // 4] = int(encode(p.type, np.array([value]))[0])
        else:
            words[offset // 4] = int(value) & 0xFFFFFFFF
    return words


_runners: dict[str, VulkanRunner | str] = {}


def _runner(name: str) -> VulkanRunner:
    if name not in _runners:
        try:
            from irtk.hal import registry
            _runners[name] = VulkanRunner(name, registry.get_device(f"vulkan://{name}"),
                                          VULKAN_PROFILES[name])
        except Exception as exc:  # noqa: BLE001 - any failure means "no such device here"
            _runners[name] = f"vulkan://{name} is not available: {type(exc).__name__}: {exc}"
    runner = _runners[name]
    if isinstance(runner, str):
        pytest.skip(runner)
    return runner


@pytest.fixture(params=DEVICES)
def vulkan(request: pytest.FixtureRequest) -> VulkanRunner:
    """Each software Vulkan device in turn, with its own target profile."""
    return _runner(request.param)


@pytest.fixture
def swiftshader() -> VulkanRunner:
    return _runner("swiftshader")
