"""The Python runtime API: load a module on a device and call its exports with numpy arrays.

    m = irtk.runtime.load("model.vmfb", device="local-task")
    y = m.main(np.ones((4, 2), np.float32))
    pending = m.main.async_call(x)      # a future; several may be in flight on one thread
    y = pending.result()

Never imports the compiler or a driver directly: devices come through `irtk.hal.registry`.
"""
from irtk.runtime.abi import TensorType
from irtk.runtime.io import (check_output_target, format_output, format_results, parse_input,
                             write_output)
from irtk.runtime.module import AsyncCall, ExportedFunction, LoadedModule, load, vm_context
from irtk.runtime.device_array import DeviceArray
from irtk.runtime.typed_array import TypedArray
from irtk.vm.limits import Limits

__all__ = ["load", "vm_context", "LoadedModule", "ExportedFunction", "AsyncCall", "TensorType",
           "parse_input", "format_output", "format_results", "check_output_target",
           "write_output", "TypedArray", "DeviceArray", "Limits"]
