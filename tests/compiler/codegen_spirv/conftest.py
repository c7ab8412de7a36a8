"""Fixtures for the SPIR-V codegen tests: a seeded RNG and Vulkan devices to execute on.

Execution goes through the real HAL (`irtk.hal.registry` -> hal_vulkan) with the executable
packed by `pack_executable`, exactly as a compiled module would run. A device that cannot be
created (no hal_vulkan, no loader, no such ICD) skips its tests with the reason.
"""
from __future__ import annotations

import os
import tempfile
import zlib
from dataclasses import dataclass

import numpy as np
import pytest

from irtk.compiler.codegen.spirv import (EXECUTABLE_FORMAT, SpirvKernel, compile_kernel,
                                         pack_executable)
from irtk.compiler.kernel import Kernel
from irtk.compiler.targets import VULKAN_PROFILES, VulkanProfile

os.environ.setdefault("MESA_SHADER_CACHE_DIR", tempfile.mkdtemp(prefix="irtk-codegen-mesa-"))

DEVICES = ("swiftshader", "llvmpipe")
_NP_TYPES = {"f32": np.float32, "i32": np.int32}
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

    def compile(self, kernel: Kernel, **options: int) -> SpirvKernel:
        return compile_kernel(kernel, self.profile, **options)

    def run(self, kernel: Kernel, inputs: list[np.ndarray],
            compiled: SpirvKernel | None = None) -> list[np.ndarray]:
        """The kernel's outputs for `inputs` (outputs start filled with 0xCD bytes)."""
        from irtk.hal.command_buffer import BindingRef
        from irtk.hal.semaphore import Fence

        sk = compiled or self.compile(kernel)
        dev = self.device
        executable = dev.create_executable(EXECUTABLE_FORMAT, pack_executable([sk], self.profile))
        buffers = {}
        for operand, data in zip(kernel.inputs, inputs):
            raw = np.ascontiguousarray(data, dtype=_NP_TYPES[operand.element_type]).tobytes()
            buffers[operand.binding] = dev.allocator.allocate_with_data(raw)
        for operand in kernel.outputs:
            buffers[operand.binding] = dev.allocator.allocate_with_data(
                bytes([_POISON]) * operand.byte_size)
        refs = [BindingRef(buffers[b], 0, buffers[b].size) for b, _ in sk.bindings]
        command_buffer = dev.create_command_buffer()
        command_buffer.dispatch(executable, executable.lookup(sk.entry_point), sk.workgroup_count,
                                [], refs)
        command_buffer.finalize()
        semaphore = dev.create_semaphore(0)
        dev.queue_execute(Fence(), Fence([(semaphore, 1)]), [command_buffer])
        assert semaphore.wait(1, timeout=120.0), "dispatch did not finish"
        outputs = [np.frombuffer(buffers[o.binding].read(), _NP_TYPES[o.element_type])
                   .reshape(o.shape).copy() for o in kernel.outputs]
        command_buffer.release()
        executable.release()
        for buffer in buffers.values():
            buffer.release()
        return outputs


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
