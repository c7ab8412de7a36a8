"""Calling-convention strings: how a function's arguments and results map onto register banks.

"0" + one character per argument + "_" + one per result, "v" for none; "C...D" wraps the banks
of one tuple of a variadic segment. E.g. "0rIrrCrD_v" takes (ref, i64, ref, ref, ref...).
The same string describes internal functions, imports and native exports, so link-time checks
are string comparisons and call checks are bank comparisons.
"""
from __future__ import annotations

from dataclasses import dataclass

BANK_OF_CHAR = {"i": "i32", "I": "i64", "f": "f32", "F": "f64", "r": "ref"}
CHAR_OF_BANK = {bank: char for char, bank in BANK_OF_CHAR.items()}


@dataclass(frozen=True)
class Segment:
    """A variadic segment: any number of tuples, each with these banks."""

    banks: tuple[str, ...]


@dataclass(frozen=True)
class Signature:
    text: str
    args: tuple[str | Segment, ...]
    results: tuple[str, ...]

    @property
    def is_variadic(self) -> bool:
        return any(isinstance(a, Segment) for a in self.args)

    @property
    def segments(self) -> list[Segment]:
        return [a for a in self.args if isinstance(a, Segment)]

    def arg_banks(self, segment_sizes: list[int] | tuple[int, ...] = ()) -> list[str]:
        """The flat list of argument banks for a call passing `segment_sizes` tuples."""
        banks: list[str] = []
        sizes = iter(segment_sizes)
        for arg in self.args:
            if isinstance(arg, Segment):
                banks.extend(list(arg.banks) * next(sizes))
            else:
                banks.append(arg)
        return banks


def parse(text: str) -> Signature:
    """Parse a calling convention; ValueError says what is wrong with it."""
    if not text.startswith("0") or text.count("_") != 1:
        raise ValueError(f"malformed calling convention '{text}': expected '0<args>_<results>'")
    arg_text, result_text = text[1:].split("_")
    args: list[str | Segment] = []
    i = 0
    if arg_text != "v":
        while i < len(arg_text):
            char = arg_text[i]
            if char == "C":
                end = arg_text.find("D", i)
                inner = arg_text[i + 1:end] if end > 0 else ""
                if end < 0 or not inner or any(c not in BANK_OF_CHAR for c in inner):
                    raise ValueError(f"malformed variadic segment in calling convention '{text}'")
                args.append(Segment(tuple(BANK_OF_CHAR[c] for c in inner)))
                i = end + 1
                continue
            if char not in BANK_OF_CHAR:
                raise ValueError(f"unknown type '{char}' in calling convention '{text}'")
            args.append(BANK_OF_CHAR[char])
            i += 1
    results: list[str] = []
    if result_text != "v":
        for char in result_text:
            if char not in BANK_OF_CHAR:
                raise ValueError(f"unknown result type '{char}' in calling convention '{text}'")
            results.append(BANK_OF_CHAR[char])
    return Signature(text, tuple(args), tuple(results))


def format_banks(args: list[str], results: list[str]) -> str:
    """The calling convention of a non-variadic function with these banks."""
    arg_text = "".join(CHAR_OF_BANK[b] for b in args) or "v"
    result_text = "".join(CHAR_OF_BANK[b] for b in results) or "v"
    return f"0{arg_text}_{result_text}"
