"""Ways to break a good MLIR program, for fuzzing the front end with hypothesis.

Each mutation takes the text and `pick(n)`, a draw of an integer in [0, n), so hypothesis can
shrink a failing case to a small edit. They cover byte-level damage (deletions, insertions,
truncation), token-level damage (swaps, replacements) and plausible semantic mistakes (wrong
numbers in shapes, wrong element types, undefined SSA values, bad affine maps, bad attributes).
"""
from __future__ import annotations

import re
from typing import Callable

Pick = Callable[[int], int]

# Fragments that are MLIR-ish: tokens, types, attributes, and whole bad affine maps.
VOCAB = ["%", "(", ")", "<", ">", "{", "}", "[", "]", ":", ",", "x", "?", "=", "->", "@", "#",
         "^bb0", '"', "tensor<", "dense<", "f32", "i2", "i64", "index", "f16", "i1", "-1", "0",
         "0x7F", "1.5e400", "99999999999999999999999", "d0", "d5", "%0", "%arg0", "ins(",
         "outs(", "linalg.yield", "return", "complex<f32>", "memref<4xf32>", "vector<4xf32>",
         "tensor<0xf32>", "tensor<f32>", "tensor<?xf32>", "tensor<4x4xf32>", '"parallel"',
         '"reduction"', '"window"', "[]", "()", "-> ()", "dense<[]>", "dense<[[1], [2, 3]]>",
         "{a = 1}", "unit", "true", "#linalg.type_fn<cast_unsigned>", "array<i64: 1, 0>",
         "affine_map<(d0) -> (d0 floordiv 2)>"]
MAPS = ["affine_map<(d0) -> (d0)>", "affine_map<(d0, d1) -> (d1, d0)>",
        "affine_map<(d0, d1) -> (d0 mod 2, d1)>", "affine_map<(d0, d1)[s0] -> (d0 + s0, d1)>",
        "affine_map<(d0, d1) -> (d0 * d1)>", "affine_map<(d0, d1) -> ()>",
        "affine_map<(d0, d1, d2) -> (d0, d1)>", "affine_map<() -> ()>",
        "affine_map<(d0, d1) -> (d0, 0)>", "affine_map<(d0, d1) -> (d0 - d1, d1)>",
        "affine_map<(d0, d1) -> (-d0, d1)>", "affine_map<(d0, d1) -> (d0 * 2 + 1, d1)>"]
TYPES = ["f16", "f32", "i8", "i32", "i64", "index", "i1", "bf16", "f8E4M3FN", "i2", "f4E2M1FN"]
SSA = ["%undefined", "%0", "%arg0", "%c0", "%1"]
NUMBERS = ["0", "1", "2", "3", "5", "7", "64", "-1", "4294967296"]

_TOKEN = re.compile(r"%[\w.$-]+|@[\w.$-]+|\^\w+|[A-Za-z_][\w.$]*|-?\d+(?:\.\d*(?:[eE][-+]?\d+)?)?|\S")


def _splice(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


def delete(text: str, pick: Pick) -> str:
    i = pick(len(text))
    return _splice(text, i, i + 1 + pick(8), "")


def insert(text: str, pick: Pick) -> str:
    i = pick(len(text) + 1)
    return _splice(text, i, i, VOCAB[pick(len(VOCAB))])


def truncate(text: str, pick: Pick) -> str:
    return text[:pick(len(text))]


def swap_tokens(text: str, pick: Pick) -> str:
    tokens = [m.span() for m in _TOKEN.finditer(text)]
    if len(tokens) < 2:
        return text
    a, b = sorted((pick(len(tokens)), pick(len(tokens))))
    (s1, e1), (s2, e2) = tokens[a], tokens[b]
    if a == b:
        return text
    return text[:s1] + text[s2:e2] + text[e1:s2] + text[s1:e1] + text[e2:]


def replace_token(text: str, pick: Pick) -> str:
    tokens = [m.span() for m in _TOKEN.finditer(text)]
    if not tokens:
        return text
    s, e = tokens[pick(len(tokens))]
    if pick(2):
        new = VOCAB[pick(len(VOCAB))]
    else:
        new = text[slice(*tokens[pick(len(tokens))])]
    return _splice(text, s, e, new)


def _replace_match(text: str, pattern: str, choices: list[str], pick: Pick) -> str:
    found = list(re.finditer(pattern, text))
    if not found:
        return text
    m = found[pick(len(found))]
    return _splice(text, m.start(), m.end(), choices[pick(len(choices))])


def change_number(text: str, pick: Pick) -> str:
    """Shapes that do not match, out-of-range dims and attribute values."""
    return _replace_match(text, r"\d+", NUMBERS, pick)


def change_type(text: str, pick: Pick) -> str:
    return _replace_match(text, r"\b(f16|f32|f64|i1|i8|i16|i32|i64|index|bf16)\b", TYPES, pick)


def change_ssa(text: str, pick: Pick) -> str:
    """Undefined values, values of the wrong type, uses before definitions."""
    return _replace_match(text, r"%\w+", SSA + [m.group() for m in re.finditer(r"%\w+", text)][:20],
                          pick)


def change_map(text: str, pick: Pick) -> str:
    return _replace_match(text, r"affine_map<[^>]*>", MAPS, pick)


def change_attribute(text: str, pick: Pick) -> str:
    """Attribute values of the wrong kind or size (permutations, dimensions, strides...)."""
    return _replace_match(text, r"(?<== )\[[^\]]*\]|(?<== )dense<[^>]*>|\"(parallel|reduction)\"",
                          ["[]", "[0, 0]", "[1, 0, 2, 3]", "[-1]", "[7]", '"window"', "dense<[1]>",
                           "array<i64: 0>", "1 : i64", '"x"'], pick)


MUTATIONS = [delete, insert, truncate, swap_tokens, replace_token, change_number, change_type,
             change_ssa, change_map, change_attribute]
