"""Native VM modules: Python implementations of imports that bytecode modules call.

Each is an `irtk.vm.NativeModule` — a sorted table of exports with calling conventions, and the
ref types of the objects it hands out (`hal_types` for `hal`) — so adding a module (such as
`check`) is adding a table and its methods.
"""
from irtk.modules.hal import HalModule

__all__ = ["HalModule"]
