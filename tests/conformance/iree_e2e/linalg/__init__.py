"""IREE's end-to-end check tests, kept as data files (see README.md)."""
