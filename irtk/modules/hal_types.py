"""The `!hal.*` ref types: the `irtk.hal` objects that bytecode holds in ref registers.

IREE's `iree_hal_module_register_all_types`: `HalModule.REF_TYPES` lists these, so they are
registered with the VM when `irtk.modules.hal` is imported; the compiler names the ones its host
code uses from here in the `types` table of the modules it writes.
"""
from __future__ import annotations

from irtk import hal
from irtk.vm.ref_types import RefType

ALLOCATOR = RefType("!hal.allocator", (hal.Allocator,))
BUFFER = RefType("!hal.buffer", (hal.Buffer,))
BUFFER_VIEW = RefType("!hal.buffer_view", (hal.BufferView,))
COMMAND_BUFFER = RefType("!hal.command_buffer", (hal.CommandBuffer,))
DEVICE = RefType("!hal.device", (hal.Device,))
EXECUTABLE = RefType("!hal.executable", (hal.Executable,))
FENCE = RefType("!hal.fence", (hal.Fence,))
SEMAPHORE = RefType("!hal.semaphore", (hal.Semaphore,))

HAL_TYPES = (ALLOCATOR, BUFFER, BUFFER_VIEW, COMMAND_BUFFER, DEVICE, EXECUTABLE, FENCE, SEMAPHORE)
