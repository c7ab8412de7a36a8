"""The conformance suite's executables: the same two functions for every driver.

  mul_add: c[i] = a[i] * b[i] + 1   (bindings a, b, c; push constant n)
  scale:   x[i] = x[i] * 2          (binding x; push constants n and the bits of 2.0)

Vulkan gets SPIR-V (tests/hal_vulkan/kernels.py), the CPU drivers a reference-kernel executable
(tests/hal_cpu/cpu_kernel_builder.py) built for the element count; the CPU kernels take the
count from their loop ranges and ignore push constants.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from irtk.hal import Device, Executable
from tests.hal_cpu import cpu_kernel_builder as cpu
from tests.hal_vulkan import kernels as vulkan

WORKGROUP_SIZE = 64


@dataclass
class Program:
    executable: Executable
    n: int
    workgroups: tuple[int, int, int]
    mul_add_constants: list[int]
    scale_constants: list[int]


def load(device: Device, n: int) -> Program:
    """The program for `n` elements, created on `device`."""
    workgroups = (-(-n // WORKGROUP_SIZE), 1, 1)
    two = struct.unpack("<I", struct.pack("<f", 2.0))[0]
    if device.supports_format("vulkan-spirv-fb"):
        exe = device.create_executable("vulkan-spirv-fb",
                                       vulkan.mul_add_executable(WORKGROUP_SIZE))
    else:
        mul_add = cpu.kernel(
            "mul_add", [n], [cpu.operand(0, "f32", [n], 1), cpu.operand(1, "f32", [n], 1)],
            [cpu.operand(2, "f32", [n], 1)],
            [cpu.op("arith.mulf", 0, 1, result_type="f32"),
             cpu.op("arith.constant", result_type="f32", float_value=1.0),
             cpu.op("arith.addf", 3, 4, result_type="f32")], [5], tile_size=WORKGROUP_SIZE)
        scale = cpu.kernel(
            "scale", [n], [], [cpu.operand(0, "f32", [n], 1)],
            [cpu.op("arith.constant", result_type="f32", float_value=2.0),
             cpu.op("arith.mulf", 0, 1, result_type="f32")], [2], tile_size=WORKGROUP_SIZE)
        exe = device.create_executable("cpu-kernel-fb", cpu.executable(mul_add, scale))
    return Program(exe, n, workgroups, [n], [n, two])
