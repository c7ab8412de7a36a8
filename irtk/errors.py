"""Error types: every failure a user can cause is an `irtk.Error` subclass.

The CLI turns these into a one-line message and a non-zero exit; anything else escaping is a bug.
"""
from __future__ import annotations


class Error(Exception):
    """Base of all errors a user of irtk can cause (bad input, bad module, missing device)."""


class ParseError(Error):
    """Malformed MLIR text; the message starts with `file:line:col: error:`."""


class CompileError(Error):
    """A well-formed program that irtk cannot compile (unsupported op, type or shape)."""


class CompileWarning(UserWarning):
    """A function left out of a partial module (`compile_str(..., partial=True)`) as a stub
    that fails when called; the message is its compile error, `function` its name."""

    def __init__(self, message: str, function: str | None = None) -> None:
        super().__init__(message)
        self.function = function


class VerificationError(Error):
    """A module file that fails loading or verification (names function and bytecode offset)."""


class DeviceError(Error):
    """A device that cannot be found, created, or that lacks what an executable needs."""


class DependencyError(Error):
    """An optional dependency (an importer's extra) that is not installed; the message says
    what to install."""


class InputError(Error):
    """Wrong number, shape or type of arguments passed to an exported function."""


class RuntimeFailure(Error):
    """A program that failed while running (a `fail` op, a failed fence, a device fault)."""

    # Set when the program failed itself (a `fail` op): its status and the failing function.
    status: int | None = None
    function: str | None = None
