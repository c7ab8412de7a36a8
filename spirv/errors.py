"""Error types for the spirv package.

Every failure the package reports is a SpirvError, so callers can catch one type
whether the problem came from our reader, our builder or SPIRV-Tools.
"""

from __future__ import annotations


class SpirvError(Exception):
    """Base class for every error raised by the spirv package."""


class SpirvParseError(SpirvError):
    """A binary module is malformed; ``offset`` is the word where decoding failed."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"{message} (at word offset {offset})")
        self.offset = offset


class SpirvBuildError(SpirvError):
    """The ModuleBuilder was used in a way that cannot produce a valid module."""


class SpirvValidationError(SpirvError):
    """SPIRV-Tools rejected a module; the message is the validator's diagnostic."""

    def __init__(self, message: str, diagnostic: str = "") -> None:
        super().__init__(message)
        self.diagnostic = diagnostic
