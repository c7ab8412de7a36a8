"""IREE's text forms of tensors: `--input=` values in, `result[0]: ...` lines out.

Mirroring iree-run-module's syntax lets test commands and expected outputs move between IREE
and irtk unchanged: "4x2xf32=1,2,3,4,5,6,7,8" (separators: spaces, commas, brackets; one value
is broadcast to the whole shape; no values means zeros), "f32=3.5", "4xi32=@data.bin" (raw
little-endian bytes) and "@array.npy". Element types numpy lacks ("2xf8E4M3FN=1 2", bf16, i4,
i2) parse into a `TypedArray` (values rounded to the type; raw files hold its packed storage)
and print the same way.
"""
from __future__ import annotations

import io
import math
import os
import re
import secrets
from typing import Any, Sequence

import numpy as np

from irtk import hal
from irtk.errors import InputError
from irtk.runtime.abi import TensorType, check_input_size
from irtk.runtime.typed_array import TypedArray, integer_range_error
from irtk.vm.limits import format_bytes

_SEPARATORS = re.compile(r"[\s,\[\]]+")
_EXAMPLE = "e.g. 4x2xf32=1,2,3,4,5,6,7,8"


_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|nan)", re.I)


def parse_input(text: str, where: str = "input") -> np.ndarray | TypedArray | int | float:
    """An array from IREE `--input=` text, or a Python number for a bare scalar ("5", "2.5",
    converted to the argument's type when called); InputError says what is malformed. `where`
    names the argument in messages ("--input 2")."""
    text = text.strip()
    if text.startswith("@"):
        return _load_npy(text[1:], where)
    if _NUMBER.fullmatch(text):
        return int(text) if text.lstrip("+-").isdigit() else float(text)
    type_text, sep, values = text.partition("=")
    if not sep:
        raise InputError(f"malformed input '{text}': expected TYPE=VALUES, {_EXAMPLE}")
    try:
        tensor_type = TensorType.parse(type_text)
    except ValueError as e:
        raise InputError(f"malformed input '{text}': {e}") from None
    shape = tuple(d for d in tensor_type.shape if d is not None)
    if len(shape) != len(tensor_type.shape):
        raise InputError(f"malformed input '{text}': dynamic dimension in an input type")
    et = tensor_type.element_type
    count = math.prod(shape)
    if any(d >= 1 << 63 for d in shape):
        big = max(shape)
        raise InputError(f"{where}: {type_text} has a dimension of {big:,}, more than the "
                         f"largest an array can have (2^63-1)")
    check_input_size(where, type_text, count, et.storage_bytes(count))
    if not et.has_numpy_dtype:
        return _parse_typed(text, et, shape, type_text, values.strip())
    dtype = et.numpy_dtype()
    values = values.strip()
    if values.startswith("@"):
        return _load_raw(values[1:], dtype, shape, type_text)
    tokens = [t for t in _SEPARATORS.split(values) if t]
    if not tokens:
        return np.zeros(shape, dtype)
    if len(tokens) != count and len(tokens) != 1:
        raise InputError(f"input '{_clip(text)}': {len(tokens)} values for {type_text} "
                         f"({count} elements)")
    parsed = [_parse_element(t, dtype, type_text) for t in tokens]
    if len(parsed) == 1:
        return np.full(shape, parsed[0], dtype)
    return np.array(parsed, dtype).reshape(shape)


def _parse_typed(text: str, et: hal.ElementType, shape: tuple[int, ...], type_text: str,
                 values: str) -> TypedArray:
    """Values of a type numpy lacks: numbers rounded (floats) or wrapped (integers in the
    type's signed or unsigned range) to it; a raw file holds the type's storage bytes."""
    count = math.prod(shape)
    if values.startswith("@"):
        data = _read_file(values[1:])
        needed = et.storage_bytes(count)
        if len(data) != needed:
            raise InputError(f"input file '{values[1:]}' has {len(data)} bytes, {type_text} "
                             f"needs {needed}")
        return TypedArray.from_bytes(data, shape, et)
    tokens = [t for t in _SEPARATORS.split(values) if t]
    if len(tokens) not in (0, 1, count):
        raise InputError(f"input '{_clip(text)}': {len(tokens)} values for {type_text} "
                         f"({count} elements)")
    dtype = np.dtype(np.float64 if et.is_float else np.int64)
    parsed: list[Any] = [_parse_element(t, dtype, type_text) for t in tokens] or [0]
    array = np.array(parsed, dtype)
    problem = integer_range_error(array, et)
    if problem is not None:
        raise InputError(f"input {type_text}: {problem}")
    return TypedArray.from_values(np.broadcast_to(array, (count,)).reshape(shape), et)


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _parse_element(token: str, dtype: np.dtype, type_text: str) -> Any:
    if dtype == np.bool_:
        lowered = token.lower()
        if lowered in ("true", "1"):
            return True
        if lowered in ("false", "0"):
            return False
        raise InputError(f"input {type_text}: '{token}' is not a boolean (true, false, 1, 0)")
    if dtype.kind == "f":
        try:
            return float(token)
        except ValueError:
            raise InputError(f"input {type_text}: '{token}' is not a number") from None
    try:
        value = int(token, 10)
    except ValueError:
        raise InputError(f"input {type_text}: '{token}' is not an integer") from None
    info = np.iinfo(dtype)
    if not info.min <= value <= info.max:
        raise InputError(f"input {type_text}: {value} is out of range for {dtype}")
    return value


def _load_npy(path: str, where: str) -> np.ndarray:
    """A .npy array, its header checked (well formed, no objects, a size the file holds and
    the machine can take) before any of it is allocated."""
    try:
        with open(os.fspath(path), "rb") as f:
            if f.read(4) == b"PK\x03\x04":   # a zip: an .npz archive
                raise InputError(f"{where}: input file '{path}' holds several arrays (.npz); "
                                 f"give one .npy array")
            f.seek(0)
            shape, dtype = _npy_header(f, path, where)
            count = math.prod(shape)
            check_input_size(where, f"'{path}' ({'x'.join(map(str, shape)) or 'scalar'} "
                             f"{dtype})", count, count * dtype.itemsize)
            data_start = f.tell()
            available = os.fstat(f.fileno()).st_size - data_start
            needed = count * dtype.itemsize
            if available < needed:
                raise InputError(f"{where}: input file '{path}' is cut short: its header says "
                                 f"{count:,} elements of {dtype} ({format_bytes(needed)}), "
                                 f"it holds {format_bytes(available)}")
            f.seek(0)
            array = np.load(f, allow_pickle=False)
    except OSError as e:
        raise InputError(f"{where}: cannot read input file '{path}': "
                         f"{e.strerror or e}") from None
    except (ValueError, EOFError) as e:
        raise InputError(f"{where}: cannot read input file '{path}': {e}") from None
    return array


def _npy_header(f: Any, path: str, where: str) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype a .npy header declares; InputError if it is malformed."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = fmt.read_array_header_1_0(f)
        elif version in ((2, 0), (3, 0)):
            shape, _, dtype = fmt.read_array_header_2_0(f)
        else:
            raise ValueError(f"unsupported .npy version {version}")
    except Exception as e:   # numpy parses the header text with ast: any error is a bad file
        reason = e.args[0] if e.args and isinstance(e.args[0], str) else type(e).__name__
        raise InputError(f"{where}: input file '{path}' is not a valid .npy file "
                         f"(malformed header: {reason})") from None
    if dtype.hasobject:
        raise InputError(f"{where}: input file '{path}' holds Python objects ({dtype}); "
                         f"irtk reads only numeric arrays")
    return tuple(int(d) for d in shape), dtype


def _read_file(path: str) -> bytes:
    try:
        with open(os.fspath(path), "rb") as f:
            return f.read()
    except OSError as e:
        raise InputError(f"cannot read input file '{path}': {e.strerror or e}") from None


def _load_raw(path: str, dtype: np.dtype, shape: tuple[int, ...], type_text: str) -> np.ndarray:
    data = _read_file(path)
    needed = math.prod(shape) * dtype.itemsize
    if len(data) != needed:
        raise InputError(f"input file '{path}' has {len(data)} bytes, {type_text} needs {needed}")
    return np.frombuffer(data, dtype).reshape(shape).copy()


OUTPUT_FORMS = "'-' (print), '@FILE.npy' (numpy), '@FILE' (raw bytes) or '+FILE[.npy]' (append)"


def check_output_target(text: str) -> None:
    """Refuse a malformed `--output=` before anything runs: '-', '@PATH' or '+PATH'."""
    if text == "-":
        return
    if text[:1] not in ("@", "+") or len(text) < 2:
        raise InputError(f"--output '{text}': expected {OUTPUT_FORMS}")
    folder = os.path.dirname(text[1:]) or "."
    if not os.path.isdir(folder):
        raise InputError(f"--output '{text}': no folder '{folder}'")


def write_output(text: str, value: Any, type_name: str | None = None) -> bool:
    """Write a result as `--output=text` says, as iree-run-module does: '@y.npy' a numpy file,
    '@y.bin' (any other name) its raw little-endian bytes, '+...' appended to the file; True
    when written, False for '-' (the caller prints it). Whole files are written to a temporary
    name and renamed, so nothing is ever half-written."""
    if text == "-":
        return False
    path = text[1:]
    data = _output_bytes(value, path.endswith(".npy"), type_name)
    try:
        if text.startswith("+"):
            with open(path, "ab") as f:
                f.write(data)
        else:
            folder, name = os.path.split(path)
            tmp = os.path.join(folder, f".{name}.{os.getpid()}.{secrets.token_hex(4)}")
            try:
                with open(tmp, "xb") as f:   # the umask's permissions, unlike mkstemp's 0600
                    f.write(data)
                os.replace(tmp, path)
            except BaseException:
                os.unlink(tmp)
                raise
    except OSError as e:
        raise InputError(f"cannot write '{path}': {e.strerror or e}") from None
    return True


def _output_bytes(value: Any, npy: bool, type_name: str | None) -> bytes:
    if isinstance(value, TypedArray):
        if npy:
            raise InputError(f"a {value.type_text()} result has no numpy dtype: write it as raw "
                             f"bytes (--output=@FILE.bin)")
        return value.to_bytes()
    if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
        name = type_name or ("f32" if isinstance(value, float) else "i32")
        value = np.array(value, hal.ElementType.from_name(name).numpy_dtype())
    array = np.asarray(value)   # not ascontiguousarray: it makes a rank-0 array 1-D
    if not array.flags.c_contiguous:
        array = array.copy(order="C")
    if not npy:
        return array.tobytes()
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _type_name(array: np.ndarray) -> str:
    try:
        return hal.ElementType.from_numpy(array.dtype).name
    except ValueError:
        kind = {"u": "ui", "i": "i", "f": "f"}.get(array.dtype.kind)
        return f"{kind}{array.dtype.itemsize * 8}" if kind else str(array.dtype)


def _element(value: Any, kind: str) -> str:
    if kind == "f":
        return "%G" % float(value)
    if kind == "b":
        return "1" if value else "0"
    return str(int(value))


def format_output(array: Any, max_elements: int | None = None) -> str:
    """IREE's text of a tensor: "4x2xf32=[1 2][3 4][5 6][7 8]" (floats as C's %G).

    With `max_elements`, elements past that count are left out and "..." ends the text.
    A TypedArray prints its own element type ("2xf8E4M3FN=1 2") and its values.
    """
    if isinstance(array, TypedArray):
        name = array.element_type.name
        array = array.values
    else:
        array = np.asarray(array)
        name = _type_name(array)
    head = "x".join([str(d) for d in array.shape] + [name])
    kind = array.dtype.kind
    budget = [array.size if max_elements is None else max_elements]
    truncated = [False]

    def render(a: np.ndarray) -> str:
        if a.ndim <= 1:
            items = []
            for v in a.reshape(-1):
                if budget[0] <= 0:
                    truncated[0] = True
                    break
                budget[0] -= 1
                items.append(_element(v, kind))
            return " ".join(items)
        parts = []
        for sub in a:
            if budget[0] <= 0:
                truncated[0] = True
                break
            parts.append("[" + render(sub) + "]")
        return "".join(parts)

    body = render(array)
    return f"{head}={body}" + ("..." if truncated[0] else "")


def format_results(results: Any, max_elements: int | None = None,
                   type_names: Sequence[str | None] = ()) -> str:
    """The result lines iree-run-module prints for a call's results (None, one or a tuple):
    "result[0]: hal.buffer_view" and the tensor for arrays, "result[0]: f32=2.25" for scalars
    (`type_names`, from the export's abi, says a scalar's type; else f32 or i32)."""
    if results is None:
        values: Sequence[Any] = []
    elif isinstance(results, tuple):
        values = results
    else:
        values = [results]
    lines = []
    for i, value in enumerate(values):
        if isinstance(value, (np.ndarray, np.generic, TypedArray)):
            lines.append(f"result[{i}]: hal.buffer_view")
            lines.append(format_output(value, max_elements))
        elif isinstance(value, (int, float)):
            name = type_names[i] if i < len(type_names) and type_names[i] else (
                "f32" if isinstance(value, float) else "i32")
            kind = "f" if isinstance(value, float) else "i"
            lines.append(f"result[{i}]: {name}={_element(value, kind)}")
        else:
            lines.append(f"result[{i}]: {value!r}")
    return "\n".join(lines)
