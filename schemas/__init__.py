"""FlatBuffers schemas of irtk's file formats and the Python code generated from them."""
from schemas import bytecode_module_generated as bytecode_module
from schemas import cpu_executable_generated as cpu_executable
from schemas import vulkan_executable_generated as vulkan_executable

BYTECODE_MODULE_IDENTIFIER = b"IRTK"
VULKAN_EXECUTABLE_IDENTIFIER = b"IRVK"
CPU_EXECUTABLE_IDENTIFIER = b"IRCP"

__all__ = ["bytecode_module", "cpu_executable", "vulkan_executable",
           "BYTECODE_MODULE_IDENTIFIER", "VULKAN_EXECUTABLE_IDENTIFIER", "CPU_EXECUTABLE_IDENTIFIER"]
