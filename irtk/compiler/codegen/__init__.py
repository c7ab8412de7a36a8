"""Code generators: dispatch kernels -> device executables, one subpackage or module per target.

Codegen never talks to a device: it only reads kernels and target profiles.
"""
