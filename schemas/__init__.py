"""FlatBuffers schemas of irtk's file formats and the Python code generated from them."""
from schemas import bytecode_module_generated as bytecode_module
from schemas import cpu_executable_generated as cpu_executable
from schemas import vulkan_executable_generated as vulkan_executable

BYTECODE_MODULE_IDENTIFIER = b"IRTK"
VULKAN_EXECUTABLE_IDENTIFIER = b"IRVK"
CPU_EXECUTABLE_IDENTIFIER = b"IRCP"

# Executable format names: what a module's rodata segment is tagged with, what the compiler's
# target backends produce and what a driver lists in DeviceInfo.executable_formats. Named here,
# beside the schemas they name, because both sides of that contract may import this package.
VULKAN_EXECUTABLE_FORMAT = "vulkan-spirv-fb"
CPU_EXECUTABLE_FORMAT = "cpu-kernel-fb"



def object_api_name(field: str) -> str:
    """The attribute flatc's Python object API gives a schema field: `storage_buffer_8bit` ->
    `storageBuffer8bit` (for code that reads or writes fields by name)."""
    first, *rest = field.split("_")
    return first + "".join(part[:1].upper() + part[1:] for part in rest)


__all__ = ["bytecode_module", "cpu_executable", "vulkan_executable",
           "BYTECODE_MODULE_IDENTIFIER", "VULKAN_EXECUTABLE_IDENTIFIER", "CPU_EXECUTABLE_IDENTIFIER",
           "VULKAN_EXECUTABLE_FORMAT", "CPU_EXECUTABLE_FORMAT", "object_api_name"]
