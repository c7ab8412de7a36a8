"""Every shader capability (irtk.hal.capabilities) through the Vulkan side: the compiler writes
it into the executable's requirements, hal_vulkan reads it back, the driver asks devices for its
feature, and a device without it refuses the executable in the table's words."""
from __future__ import annotations

import dataclasses
import struct

import pytest

from irtk.compiler.codegen.spirv import SpirvKernel, pack_executable
from irtk.compiler.targets import VULKAN_PROFILES
from irtk.hal import CAPABILITIES, Capability, DeviceInfo
from hal_vulkan import requirements
from hal_vulkan.executable_def import ExecutableSpec, parse_executable
from hal_vulkan.physical_device import WANTED_FEATURES

# The refusals word for word (docs/hal_vulkan.md, "Requirement checks"); a new capability needs
# its line here.
REFUSALS = {
    "float16": "executable needs shaderFloat16; device 'Tiny GPU' has no 16-bit float support",
    "float64": "executable needs shaderFloat64; device 'Tiny GPU' has no 64-bit float support",
    "int8": "executable needs shaderInt8; device 'Tiny GPU' has no 8-bit integer support",
    "int16": "executable needs shaderInt16; device 'Tiny GPU' has no 16-bit integer support",
    "int64": "executable needs shaderInt64; device 'Tiny GPU' has no 64-bit integer support",
    "storage_buffer_8bit": "executable needs storageBuffer8BitAccess; device 'Tiny GPU' has no "
                           "8-bit storage buffer access",
    "storage_buffer_16bit": "executable needs storageBuffer16BitAccess; device 'Tiny GPU' has "
                            "no 16-bit storage buffer access",
    "texel_array_indexing": "executable needs shaderUniformTexelBufferArrayDynamicIndexing; "
                            "device 'Tiny GPU' has no dynamic indexing of texel buffer arrays",
}
TINY_GPU = DeviceInfo(driver="vulkan", name="Tiny GPU", api_version="1.3.0",
                      extra={"maxPushConstantsSize": "128"})
# A SPIR-V header (magic, version 1.3, generator, bound, schema): enough for the format's checks.
HEADER = struct.pack("<5I", 0x07230203, 0x00010300, 0, 1, 0)


def needing(capability: Capability) -> ExecutableSpec:
    """A packed and re-read executable whose only capability need is `capability`."""
    profile = dataclasses.replace(VULKAN_PROFILES["default"], **{capability.name: True})
    kernel = SpirvKernel(code=HEADER, entry_point="main", workgroup_size=(1, 1, 1),
                         workgroup_count=(1, 1, 1), bindings=[],
                         requirements={capability.name: True})
    return parse_executable(pack_executable([kernel], profile))


def test_the_table_has_one_refusal_per_capability():
    assert [c.name for c in CAPABILITIES] == list(REFUSALS)


@pytest.mark.parametrize("capability", CAPABILITIES, ids=lambda c: c.name)
def test_a_needed_capability_survives_the_executable_format(capability):
    spec = needing(capability)
    assert [c.name for c in CAPABILITIES if getattr(spec.requirements, c.name)] == \
        [capability.name]


@pytest.mark.parametrize("capability", CAPABILITIES, ids=lambda c: c.name)
def test_a_device_without_the_capability_refuses_in_its_words(capability):
    spec = needing(capability)
    assert requirements.problems(spec, TINY_GPU) == [REFUSALS[capability.name]]
    assert requirements.problems(
        spec, dataclasses.replace(TINY_GPU, **{capability.name: True})) == []


def test_devices_are_asked_for_every_capability():
    """The logical device enables what it is asked for, and DeviceInfo reports from the same
    feature query: a capability missing here would always read as absent."""
    wanted = {feature for group in WANTED_FEATURES.values() for feature in group}
    assert [c.vulkan_feature for c in CAPABILITIES if c.vulkan_feature not in wanted] == []
