"""`load()` and the objects it returns: a module instance whose exports take numpy arrays.

Loading verifies the module, links the `hal` module bound to the chosen device (plus any other
native modules given), and runs `__init` — so a module that has no executable for the device
fails here, with the message the compiler put in its `fail` op.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import os
import time
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, Sequence

from irtk import hal
from irtk.errors import InputError, RuntimeFailure, VerificationError
from irtk.hal import registry
from irtk.modules.hal import HalModule
from irtk.runtime import abi
from irtk.runtime.device_array import DeviceArray
from irtk.vm import Context, Invocation, NativeModule, VMBuffer, VMList, load_module
from irtk.vm.calling_convention import Signature
from irtk.vm.module import BytecodeModule
from irtk.vm.limits import Limits

if TYPE_CHECKING:
    from irtk.runtime.benchmark import BenchmarkResult

log = logging.getLogger("irtk.runtime")
ModuleSource = bytes | bytearray | memoryview | str | os.PathLike
# Ref arguments without an abi type that are handed to the VM unconverted.
_PASSED_AS_IS = (hal.Fence, hal.Buffer, hal.BufferView, VMBuffer, VMList)


def _device(device: str | hal.Device) -> hal.Device:
    return registry.get_device(device) if isinstance(device, str) else device


def vm_context(module: ModuleSource, device: str | hal.Device = "local-task",
               native_modules: Sequence[NativeModule] = (), *,
               limits: Limits | None = None) -> Context:
    """The lower-level way in: a VM context whose `call(name, values)` takes raw VM values
    (ints, floats, refs such as `hal.BufferView`) and returns the raw result list."""
    dev = _device(device)
    return Context(load_module(module), [HalModule(dev), *native_modules], limits=limits)


def load(module: ModuleSource | BytecodeModule, device: str | hal.Device | None = None,
         native_modules: Sequence[NativeModule] = (), *,
         limits: Limits | None = None) -> "LoadedModule":
    """Load a module (bytes, or the path of a .vmfb, which is mapped) on `device` (by default
    one that runs the module's executables: `default_device`).

    `limits` (an `irtk.Limits`) bounds each call and `__init`, which runs here: steps, wall
    time (`Limits(seconds=2)`), VM heap and device memory; the defaults bound only memory."""
    start = time.perf_counter()
    bytecode = module if isinstance(module, BytecodeModule) else load_module(module)
    dev = _device(device if device is not None else default_device(bytecode))
    try:
        context = Context(bytecode, [HalModule(dev), *native_modules], limits=limits)
    except RuntimeFailure as e:  # `__init` failed: say on which device
        raise RuntimeFailure(f"cannot load module '{bytecode.name}' on device "
                             f"'{dev.info.name}': {e}") from None
    log.info("loaded module '%s' on '%s' (its initializer included): %.3f s", bytecode.name,
             dev.info.name, time.perf_counter() - start)
    return LoadedModule(context, dev)


# Executable FlatBuffer identifiers (bytes 4..8) and the device that runs each, in the order
# a module holding several is run without a --device: the CPU reference first.
_EXECUTABLE_DEVICES = ((b"IRCP", "local-task"), (b"IRVK", "vulkan"))


def default_device(module: BytecodeModule) -> str:
    """The device to run `module` on when none is named: one that loads its executables
    (local-task for CPU executables, else the first Vulkan device); local-task for a module
    without executables."""
    found = {bytes(seg.data[4:8]) for seg in module.rodata if len(seg.data) >= 8}
    for identifier, device in _EXECUTABLE_DEVICES:
        if identifier in found:
            return device
    return "local-task"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


class ExportedFunction:
    """An export as a Python callable: numpy arrays (or array-likes, scalars) in and out."""

    def __init__(self, module: "LoadedModule", name: str, reflection: dict[str, str]) -> None:
        self.module = module
        self.name = name
        self.signature: Signature = module.context.signature(name)
        banks = self.signature.arg_banks()
        try:
            self.arg_types = abi.parse_types(reflection["abi.args"]) \
                if "abi.args" in reflection else [None] * len(banks)
            self.result_types = abi.parse_types(reflection.get("abi.results", ""))
        except ValueError as e:
            raise VerificationError(f"export '{name}': malformed abi reflection: {e}") from None
        if len(self.arg_types) != len(banks):
            raise VerificationError(
                f"export '{name}': abi.args lists {len(self.arg_types)} types, its calling "
                f"convention {self.signature.text} takes {len(banks)} arguments")
        # inspect.signature(m.main) and help(m.main) show the arguments with their shapes and
        # element types: a class per export, since help() documents an instance's class.
        self.__signature__ = inspect.Signature(
            [inspect.Parameter(f"arg{i}", inspect.Parameter.POSITIONAL_ONLY,
                               annotation=str(t) if t else bank)
             for i, (t, bank) in enumerate(zip(self.arg_types, banks))],
            return_annotation=", ".join(str(t) for t in self.result_types) or "None")
        doc = (f"Export '{name}' of module "
               f"'{module.name}' on {module.device.info.name}: numpy arrays (or array-likes, "
               f"scalars) of these shapes and element types in, numpy arrays out. "
               f"`.async_call(...)` starts the call and returns a future.")
        self.__class__ = type(name, (ExportedFunction,), {
            "__doc__": doc, "__module__": __name__, "__signature__": self.__signature__})
        self.__doc__ = doc

    def __call__(self, *args: Any, device_results: bool = False) -> Any:
        """Call with numpy arrays (or array-likes, scalars, DeviceArrays); results come back
        as numpy arrays, or with `device_results=True` as DeviceArrays left on the device."""
        raw = self.module.context.call(self.name, self._vm_args(args))
        return _python_results(raw, self.module.device if device_results else None)

    def async_call(self, *args: Any, device_results: bool = False) -> "AsyncCall":
        """Start the call and return at once with an `AsyncCall` (a future): the call runs
        until it finishes or waits on a fence (`hal.fence.await`), so several calls can be in
        flight on one thread; `result()` drives them and returns what `__call__` would, and
        `await` works on it from asyncio."""
        return AsyncCall(self.module.context.start(self.name, self._vm_args(args)),
                         self.module.device if device_results else None)

    def benchmark(self, *args: Any, repetitions: int = 5, min_time: float = 0.1,
                  warmup: int = 1, device_times: bool = True) -> "BenchmarkResult":
        """Time calls with these arguments, uploaded once (irtk.runtime.benchmark): median,
        min and max seconds per call over `repetitions` runs of at least `min_time` s each;
        then (unless `device_times=False`) the device time of each dispatch, traced."""
        from irtk.runtime.benchmark import benchmark
        return benchmark(self, args, repetitions=repetitions, min_time=min_time, warmup=warmup,
                         device_times=device_times)

    def prepare(self, args: tuple[Any, ...] | list[Any]) -> list[Any]:
        """The VM values a call passes for `args` (tensors as buffer views on the device):
        what `benchmark` converts once and reuses."""
        return self._vm_args(tuple(args))

    def _vm_args(self, args: tuple[Any, ...]) -> list[Any]:
        banks = self.signature.arg_banks()
        if len(args) != len(banks):
            raise InputError(f"{self.name}: expected {_plural(len(banks), 'argument')}, "
                             f"got {len(args)}")
        values = []
        device = self.module.device
        for i, (value, bank, expected) in enumerate(zip(args, banks, self.arg_types)):
            where = f"{self.name}: argument {i}"
            if bank == "ref" and expected is None and isinstance(value, _PASSED_AS_IS):
                values.append(value)   # e.g. a fence for a function that waits on it
            elif bank == "ref":
                values.append(abi.to_buffer_view(value, expected, device, where))
            else:
                values.append(abi.to_scalar(value, bank, expected, where))
        return values

    def __repr__(self) -> str:
        args = ", ".join(str(t) if t else "?" for t in self.arg_types)
        results = ", ".join(str(t) for t in self.result_types)
        return f"<irtk function {self.name}({args}) -> ({results})>"


def _python_results(raw: list[Any], device: hal.Device | None = None) -> Any:
    """Results as Python values; buffer views as DeviceArrays on `device` when one is given."""
    results = [DeviceArray(r, device) if device is not None and isinstance(r, hal.BufferView)
               else abi.from_vm(r) for r in raw]
    if not results:
        return None
    return results[0] if len(results) == 1 else tuple(results)


class AsyncCall:
    """An exported function call in flight (`ExportedFunction.async_call`).

    `done()` resumes the call if what it waits for is ready and says whether it has finished;
    `result(timeout=None)` waits for it — advancing the module's other calls in flight
    meanwhile — and returns numpy arrays as a plain call does, or raises the call's error
    (TimeoutError when `timeout` seconds pass first; the call stays in flight).
    """

    def __init__(self, invocation: Invocation, device: hal.Device | None = None) -> None:
        self.invocation = invocation
        self._device = device   # results as DeviceArrays on it (device_results=True)

    def done(self) -> bool:
        return self.invocation.poll()

    def result(self, timeout: float | None = None) -> Any:
        return _python_results(self.invocation.result(timeout), self._device)

    def __await__(self) -> Generator[Any, None, Any]:
        """`await pending` in a coroutine: waits in the event loop's thread pool (the call
        advances there, as `result()` advances it on any thread) without blocking the loop."""
        if self.done():
            return self.result(0)
        loop = asyncio.get_running_loop()
        return (yield from loop.run_in_executor(None, self.result).__await__())

    def __repr__(self) -> str:
        return repr(self.invocation).replace("invocation", "async call", 1)


class LoadedModule:
    """A module instance on a device; `module.main(a, b)` or `module["main"](a, b)`."""

    def __init__(self, context: Context, device: hal.Device) -> None:
        self.context = context
        self.device = device
        self.name = context.module.name
        self._functions = {e.name: ExportedFunction(self, e.name, e.reflection)
                           for e in context.module.exports}

    @property
    def function_names(self) -> list[str]:
        return list(self._functions)

    def __getitem__(self, name: str) -> ExportedFunction:
        try:
            return self._functions[name]
        except KeyError:
            raise InputError(f"module '{self.name}' has no function '{name}'; functions: "
                             f"{', '.join(self._functions) or 'none'}") from None

    def __contains__(self, name: object) -> bool:
        return name in self._functions

    def __getattr__(self, name: str) -> ExportedFunction:
        functions = self.__dict__.get("_functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(f"module '{self.__dict__.get('name', '?')}' has no function "
                             f"'{name}'")

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | set(self._functions))

    def call_raw(self, name: str, *values: Any) -> list[Any]:
        """Call an export with raw VM values; returns the raw results."""
        return self.context.call(name, list(values))

    def __repr__(self) -> str:
        return f"<irtk module '{self.name}' on {self.device.info.name}: " \
               f"{', '.join(self._functions)}>"
