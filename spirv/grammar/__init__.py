"""Code generation from the Khronos SPIR-V grammar; see generate_tables."""
