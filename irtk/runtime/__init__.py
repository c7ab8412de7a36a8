"""The Python runtime API: load a module on a device and call its exports with numpy arrays.

    m = irtk.runtime.load("model.vmfb", device="local-task")
    y = m.main(np.ones((4, 2), np.float32))

Never imports the compiler or a driver directly: devices come through `irtk.hal.registry`.
"""
from irtk.runtime.abi import TensorType
from irtk.runtime.io import format_output, format_results, parse_input
from irtk.runtime.module import ExportedFunction, LoadedModule, load, vm_context

__all__ = ["load", "vm_context", "LoadedModule", "ExportedFunction", "TensorType",
           "parse_input", "format_output", "format_results"]
