"""Executables: functions looked up by name, their interface, and refusal of foreign formats."""
from __future__ import annotations

import pytest

from irtk.errors import DeviceError
from tests.hal import programs


def test_functions_are_looked_up_by_name(device):
    program = programs.load(device, 100)
    exe = program.executable
    assert [e.name for e in exe.exports] == ["mul_add", "scale"]
    assert exe.lookup("mul_add") == 0 and exe.lookup("scale") == 1
    with pytest.raises(KeyError):
        exe.lookup("nope")
    exe.release()
    exe.release()  # idempotent


def test_a_format_the_device_does_not_run_is_refused_naming_it(device):
    other = "cpu-kernel-fb" if device.supports_format("vulkan-spirv-fb") else "vulkan-spirv-fb"
    assert not device.supports_format(other)
    with pytest.raises(DeviceError, match=f"cannot load executable format '{other}'"):
        device.create_executable(other, b"\x00" * 64)
