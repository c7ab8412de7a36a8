"""The CPU HAL drivers: `local-sync` (inline on the caller's thread) and `local-task` (a task
system over worker threads).

Both run "cpu-kernel-fb" executables, whose kernels are reference programs that
`hal_cpu.kernel` evaluates with numpy over one tile of the iteration space per workgroup. They are
the reference the Vulkan driver is checked against, so their numerical rules are written down in
`docs/hal_cpu.md` and in `hal_cpu.ops`.
"""
from hal_cpu.buffer import CpuAllocator, CpuBuffer
from hal_cpu.command_buffer import CpuCommandBuffer
from hal_cpu.device import CpuDevice
from hal_cpu.driver import CpuDriver, create_sync_driver, create_task_driver
from hal_cpu.executable import CpuExecutable
from schemas import CPU_EXECUTABLE_FORMAT as EXECUTABLE_FORMAT
from hal_cpu.semaphore import CpuSemaphore

__all__ = [
    "CpuAllocator", "CpuBuffer", "CpuCommandBuffer", "CpuDevice", "CpuDriver", "CpuExecutable",
    "CpuSemaphore", "EXECUTABLE_FORMAT", "create_sync_driver", "create_task_driver",
]
