"""What the VM fuzz tests feed and how they exercise one (possibly mangled) module file.

`exercise(data)` does everything a user of an untrusted file could make irtk do with it: load
(parse, verify), link, decode, run `__init` and every export, disassemble, and assemble the
disassembly again. Only `irtk.Error`s may come out; anything else — a Python exception, a
crash, a hang — is a bug. Runs are bounded (`STEP_LIMIT`, small buffer and list limits), so a
mangled loop or allocation size ends in a RuntimeFailure instead of a hang or an OOM.

`exercise_text(text)` does the same for VM assembly: the assembler may only raise ParseError.

`python -m tests.vm.fuzzing N` runs N random mutations of the assembly text and 2N of the module
files, and saves any input that escapes as `tests/vm/corpus/<kind>-<hash>.vmfb` (or `.vmasm`);
the test suite replays every file kept there.
"""
from __future__ import annotations

import contextlib
import hashlib
import random
import struct
import sys
import traceback
from pathlib import Path
from typing import Any, Iterator

from irtk.errors import Error
from irtk.vm import Context, FenceWait, NativeFunction, NativeModule, VMBuffer, load_module, refs
from irtk.vm.assembler import assemble
from irtk.vm.disassembler import disassemble_module

CORPUS = Path(__file__).parent / "corpus"
STEP_LIMIT = 5000
_ZERO = {"i32": 0, "i64": 0, "f32": 0.0, "f64": 0.0, "ref": None}


class Sink(NativeModule):
    """Imports for the sample: a variadic one, a ref-returning one and a yieldable one."""

    name = "sink"
    EXPORTS = (NativeFunction("put", "0rCiD_i"), NativeFunction("take", "0I_r"),
               NativeFunction("wait", "0i_i", yieldable=True))

    def put(self, ref: Any, values: list[int]) -> int:
        return len(values)

    def take(self, n: int) -> Any:
        return VMBuffer(bytearray(4), readonly=False) if n % 2 else None

    def wait(self, x: int) -> FenceWait:
        return FenceWait([], None, lambda reached: x + 1)   # ready at once: no hang


SAMPLE_TEXT = """
module @sample
type "!vm.buffer"
type "!vm.list"
import @sink.put "0rCiD_i"
import @sink.take "0I_r"
import @sink.wait "0i_i"
rodata @text "text/plain" x"68656c6c6f"
globals i32 1, i64 1, f32 1, f64 1, ref 1
init @__init
export @main = @main {abi.args = "i32;i64", abi.results = "i32"}
export @data = @data

func @__init "0v_v" {
    i32:0 = const.i32 3
    global.store.i32 global.i32[0], i32:0
    i64:0 = const.i64 -9
    global.store.i64 global.i64[0], i64:0
    f32:0 = const.f32 1.5
    global.store.f32 global.f32[0], f32:0
    f64:0 = const.f64 -2.25
    global.store.f64 global.f64[0], f64:0
    ref:0 = const.ref.rodata @text
    global.store.ref global.ref[0], ref:0
    return ()
}

func @helper "0iI_i" {
    i32:1 = const.i32 1
    i32:0 = add.i32 i32:0, i32:1
    i32:0 = call.import @sink.wait(i32:0)
    return (i32:0)
}

func @main "0iI_i" registers(i32 8, i64 2, f64 2, ref 3) {
    i32:1 = global.load.i32 global.i32[0]
    i32:2 = const.i32 0
    br ^loop
  ^loop:
    i32:3 = cmp.lt.s.i32 i32:2, i32:1 loc("sample.mlir:4:7")
    cond_br i32:3, ^body, ^done
  ^body:
    i32:2 = call @helper(i32:2, i64:0)
    br_table i32:2, ^loop, [^loop, ^done]
  ^done:
    ref:0 = const.ref.rodata @text
    i32:4 = call.import.variadic @sink.put [2](ref:0, i32:0, i32:2)
    ref:1 = call.import @sink.take(i64:0)
    i32:5 = cmp.nz.ref ref:1
    i32:6 = cmp.type.ref ref:1, "!vm.buffer"
    f64:0 = cast.si32.f64 i32:4
    f64:1 = global.load.f64 global.f64[0]
    f64:0 = mul.f64 f64:0, f64:1
    i64:1 = cast.f64.si64 f64:0
    discard.refs (ref:1)
    cond_br i32:5, ^fail, ^ok
  ^fail:
    fail i32:5, "unexpected buffer"
  ^ok:
    return (i32:4)
}

func @data "0v_i" registers(i32 4, i64 4, f32 2, ref 4) {
    i64:0 = const.i64 16
    ref:0 = buffer.alloc i64:0
    i64:1 = const.i64 4
    i32:0 = const.i32 -2
    buffer.fill.i32 ref:0, i64:1, i64:1, i32:0
    buffer.store.i16 ref:0, i64:1, i32:0
    i32:1 = buffer.load.i16.s ref:0, i64:1
    ref:1 = buffer.clone ref:0, i64:1, i64:1
    i64:2 = const.i64 0
    i32:2 = buffer.compare ref:0, i64:1, ref:1, i64:2, i64:1
    f32:0 = buffer.load.f32 ref:0, i64:1
    i32:3 = const.i32 2
    ref:2 = list.alloc i32:3
    list.resize ref:2, i32:3
    list.set.ref ref:2, i32:2, ref:1
    i32:3 = const.i32 0
    list.set.f32 ref:2, i32:3, f32:0
    i32:3 = list.size ref:2
    ref:3 = list.get.ref ref:2, i32:2
    i32:1 = add.i32 i32:1, i32:2
    return (i32:1)
}
"""
SAMPLE = assemble(SAMPLE_TEXT)

# A host program as the compiler writes them: create an executable in `__init`, then per call
# check the argument, allocate, record a fill and a dispatch, submit, await, return a view.
HAL_SAMPLE_TEXT = """
module @halsample
import @hal.device.default "0v_r"
import @hal.device.allocator "0r_r"
import @hal.allocator.allocate "0riiI_r"
import @hal.buffer_view.create "0rIIiiCID_r"
import @hal.buffer_view.assert "0rriiCID_v"
import @hal.command_buffer.create "0riii_r"
import @hal.command_buffer.fill_buffer "0rrIIiIiI_v"
import @hal.command_buffer.dispatch "0rriiiiICiDCirIID_v"
import @hal.command_buffer.finalize "0r_v"
import @hal.executable.create "0rrrr_r"
import @hal.fence.create "0ri_r"
import @hal.device.queue.execute "0rIrrCrD_v"
import @hal.fence.await "0iCrD_i"
rodata @format "text/plain" x"66616b652d6662"
rodata @exe "application/octet-stream" x"00010203"
rodata @msg "text/plain" x"696e707574"
globals ref 2
init @__init
export @main = @main {abi.args = "4xf32", abi.results = "4xf32"}

func @__init "0v_v" {
    ref:0 = call.import @hal.device.default()
    global.store.ref global.ref[0], ref:0
    ref:1 = const.ref.rodata @format
    ref:2 = const.ref.rodata @exe
    ref:3 = const.ref.null
    ref:4 = call.import @hal.executable.create(ref:0, ref:1, ref:2, ref:3)
    global.store.ref global.ref[1], ref:4
    return ()
}

func @main "0r_r" {
    ref:1 = const.ref.rodata @msg
    i32:0 = const.i32 553648160
    i32:1 = const.i32 1
    i64:0 = const.i64 4
    call.import.variadic @hal.buffer_view.assert [1](ref:0, ref:1, i32:0, i32:1, i64:0)
    ref:2 = global.load.ref global.ref[0]
    ref:3 = call.import @hal.device.allocator(ref:2)
    i32:2 = const.i32 0
    i64:1 = const.i64 16
    ref:4 = call.import @hal.allocator.allocate(ref:3, i32:2, i32:2, i64:1)
    ref:5 = call.import @hal.command_buffer.create(ref:2, i32:1, i32:1, i32:2)
    i64:2 = const.i64 0
    i64:4 = const.i64 1065353216
    i32:3 = const.i32 1065353216
    i32:4 = const.i32 4
    call.import @hal.command_buffer.fill_buffer(ref:5, ref:4, i64:2, i64:1, i32:2, i64:4, i32:4, i64:2)
    ref:6 = global.load.ref global.ref[1]
    call.import.variadic @hal.command_buffer.dispatch [1, 1](ref:5, ref:6, i32:2, i32:1, i32:1, i32:1, i64:2, i32:4, i32:2, ref:4, i64:2, i64:1)
    call.import @hal.command_buffer.finalize(ref:5)
    ref:7 = call.import @hal.fence.create(ref:2, i32:2)
    ref:8 = const.ref.null
    i64:3 = const.i64 -1
    call.import.variadic @hal.device.queue.execute [1](ref:2, i64:3, ref:8, ref:7, ref:5)
    i32:5 = const.i32 -1
    i32:6 = call.import.variadic @hal.fence.await [1](i32:5, ref:7)
    ref:9 = call.import.variadic @hal.buffer_view.create [1](ref:4, i64:2, i64:1, i32:0, i32:1, i64:0)
    return (ref:9)
}
"""
HAL_SAMPLE = assemble(HAL_SAMPLE_TEXT)
WAIT_LIMIT = 0.05   # seconds a mangled program may wait on a fence nobody will signal


@contextlib.contextmanager
def small_limits() -> Iterator[None]:
    """Mangled sizes must fail fast, not allocate gigabytes."""
    saved = refs.MAX_BUFFER_BYTES, refs.MAX_LIST_SIZE
    refs.MAX_BUFFER_BYTES, refs.MAX_LIST_SIZE = 1 << 20, 1 << 12
    try:
        yield
    finally:
        refs.MAX_BUFFER_BYTES, refs.MAX_LIST_SIZE = saved


def hal_natives() -> tuple[list[NativeModule], Any]:
    """The `hal` module on an in-memory device, and a 4xf32 buffer view argument on it."""
    from irtk import hal
    from irtk.modules.hal import HalModule
    from tests.vm.fakes import FakeDevice
    device = FakeDevice()
    data = struct.pack("<4f", 1.0, -2.0, 3.5, 0.25)
    view = hal.BufferView(device.allocator.allocate_with_data(data), (4,),
                          hal.ElementType.from_name("f32"))
    return [HalModule(device), Sink()], view


def exercise(data: bytes, with_hal: bool = False) -> None:
    """Everything a file can make irtk do; raises only what is not an `irtk.Error`.

    With `with_hal`, the `hal` module is linked (an in-memory device) and ref arguments are a
    4xf32 buffer view; a call still waiting after WAIT_LIMIT seconds counts as bounded."""
    natives: list[NativeModule] = [Sink()]
    ref_arg = None
    if with_hal:
        natives, ref_arg = hal_natives()
    with small_limits():
        try:
            text = disassemble_module(data)
        except Error:
            text = None
        try:
            module = load_module(data)
        except Error:
            return
        if text is not None:
            try:
                again = disassemble_module(assemble(text))
            except Error:
                pass
            else:
                assert again == text, "disassembly does not round-trip"
        try:
            ctx = Context(module, natives, step_limit=STEP_LIMIT)
        except Error:
            return
        for export in module.exports:
            banks = ctx.signature(export.name).arg_banks()
            args = [ref_arg if b == "ref" else _ZERO[b] for b in banks]
            try:
                ctx.start(export.name, args).result(timeout=WAIT_LIMIT)
            except (Error, TimeoutError):
                pass


MUTATIONS = ("flip", "truncate", "splice", "extreme", "code")


def code_range(data: bytes) -> tuple[int, int]:
    """Where the functions' bytecode lies in the file (mutations there reach the verifier and
    the interpreter rather than the FlatBuffer reader)."""
    from irtk.vm.loader import parse_module
    module = parse_module(memoryview(data))
    first = bytes(module.functions[0].code)
    start = data.find(first)
    end = max(start + f.bytecode_offset + len(f.code) for f in module.functions)
    return start, end


def mutate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    kind = rng.choice(MUTATIONS)
    out = bytearray(data)
    if kind == "code":
        start, end = code_range(data)
        for _ in range(rng.randint(1, 4)):
            position = rng.randrange(start, end)
            out[position] = rng.randrange(256) if rng.random() < 0.5 else \
                out[position] ^ (1 << rng.randrange(8))
    elif kind == "flip":
        for _ in range(rng.randint(1, 6)):
            out[rng.randrange(len(out))] ^= rng.randint(1, 255)
    elif kind == "truncate":
        del out[rng.randrange(len(out)):]
    elif kind == "splice":   # copy a run of bytes over another place (moves offsets around)
        start, at = rng.randrange(len(out)), rng.randrange(len(out))
        chunk = out[start:start + rng.randint(1, 16)]
        out[at:at + len(chunk)] = chunk
    else:
        for _ in range(rng.randint(1, 3)):
            out[rng.randrange(len(out))] = rng.choice((0x00, 0xFF, 0x7F, 0x80))
    return kind, bytes(out)


TEXT_PIECES = ('"', "\\", "\\u", "\\ud800", "#", "@", "^", "[", "]", "(", ")", "0x", "-", "e9",
               "nan", "inf", "99999999999999999999999", "\u2028", "\x00", ":", "=", "{", "}",
               "bits(", "loc(", "registers(", "func", 'x"', "1e400", ".5", "0x1p3")


def mutate_text(text: str, rng: random.Random) -> str:
    """Replace, delete or insert characters and syntax pieces of assembly text."""
    chars = list(text)
    alphabet = sorted(set(text)) + list(TEXT_PIECES)
    for _ in range(rng.randint(1, 6)):
        position = rng.randrange(len(chars))
        roll = rng.random()
        if roll < 0.4:
            chars[position] = rng.choice(alphabet)
        elif roll < 0.7:
            del chars[position]
        else:
            chars.insert(position, rng.choice(alphabet))
    return "".join(chars)


def exercise_text(text: str) -> None:
    """The assembler refuses bad text with a ParseError (an `irtk.Error`) and nothing else."""
    try:
        assemble(text)
    except Error:
        pass


def save(kind: str, data: bytes) -> Path:
    CORPUS.mkdir(exist_ok=True)
    path = CORPUS / f"{kind}-{hashlib.sha256(data).hexdigest()[:12]}.vmfb"
    path.write_bytes(data)
    return path


def campaign(count: int, seed: int = 0) -> int:
    """Run `count` mutations of each sample; save and report the inputs that escape."""
    rng = random.Random(seed)
    found = 0
    for i in range(count):
        text = mutate_text(HAL_SAMPLE_TEXT if i % 2 else SAMPLE_TEXT, rng)
        try:
            exercise_text(text)
        except Exception:
            found += 1
            CORPUS.mkdir(exist_ok=True)
            path = CORPUS / f"asm-{hashlib.sha256(text.encode()).hexdigest()[:12]}.vmasm"
            path.write_text(text, encoding="utf-8")
            print(f"{path.name}:", traceback.format_exc(limit=3), file=sys.stderr)
    for i in range(2 * count):
        with_hal = bool(i % 2)
        kind, data = mutate(HAL_SAMPLE if with_hal else SAMPLE, rng)
        try:
            exercise(data, with_hal)
        except Exception:
            found += 1
            path = save(("hal-" if with_hal else "") + kind, data)
            print(f"{path.name}:", traceback.format_exc(limit=3), file=sys.stderr)
    return found


if __name__ == "__main__":
    raise SystemExit(1 if campaign(int(sys.argv[1]) if len(sys.argv) > 1 else 1000,
                                   int(sys.argv[2]) if len(sys.argv) > 2 else 0) else 0)
