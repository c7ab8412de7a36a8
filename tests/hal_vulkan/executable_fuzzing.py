"""Fuzzing "vulkan-spirv-fb" executables against a Vulkan device with the validation layer off.

Executables come from module files, which are untrusted. Before the shader verifier, one changed
field or SPIR-V word crashed SwiftShader or lavapipe inside vkCreateComputePipelines or at
dispatch. Here every mutation is loaded and, when the driver accepts it, dispatched over
buffers of the sizes the original needs: the only acceptable outcomes are success or an
`irtk.Error`. Mutations are structure-aware (every field of the executable, the SPIR-V
words, the shader's LocalSize) and byte-level (random bytes of the whole FlatBuffer).

A crash cannot be caught in-process, so the test runs the campaign in a child process
(`python -m tests.hal_vulkan.executable_fuzzing DEVICE COUNT SEED`), which writes each input to
a file before trying it: after a crash that file is the input that crashed, and the test saves
it to `corpus/`. Every file in the corpus is replayed by the suite.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import random
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np

from irtk.errors import Error
from irtk.hal import BindingRef, Fence
from schemas import VULKAN_EXECUTABLE_IDENTIFIER
from schemas import vulkan_executable as ve

CORPUS = Path(__file__).parent / "corpus"
ELEMENTS = 1000
_SPECIAL_WORDS = (0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 1024, 1 << 16)
_ADD = """func.func @main(%a: tensor<{n}xf32>, %b: tensor<{n}xf32>) -> tensor<{n}xf32> {{
  %e = tensor.empty() : tensor<{n}xf32>
  %r = linalg.add ins(%a, %b : tensor<{n}xf32>, tensor<{n}xf32>) outs(%e : tensor<{n}xf32>)
    -> tensor<{n}xf32>
  return %r : tensor<{n}xf32>
}}"""
_DYNAMIC_ADD = """func.func @main(%a: tensor<?xf32>, %b: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?xf32>
  %e = tensor.empty(%n) : tensor<?xf32>
  %r = linalg.add ins(%a, %b : tensor<?xf32>, tensor<?xf32>) outs(%e : tensor<?xf32>)
    -> tensor<?xf32>
  return %r : tensor<?xf32>
}"""


@dataclasses.dataclass(frozen=True)
class Sample:
    """An executable the compiler made and how to dispatch it."""

    name: str
    data: bytes
    workgroups: tuple[int, int, int]
    constants: tuple[int, ...]
    elements: int = ELEMENTS  # f32 elements of each buffer a dispatch binds


def _executable_of(vmfb: bytes) -> bytes:
    from irtk.vm.loader import load_module

    module = load_module(vmfb)
    return bytes(next(s.data for s in module.rodata if s.name.startswith("executable_")))


@functools.lru_cache(maxsize=None)
def samples() -> tuple[Sample, ...]:
    """A static add (storage buffers), a dynamic one (push constants; texel buffers on the
    llvmpipe profile) and a row sum read through texel windows."""
    import irtk
    from irtk.compiler.codegen.spirv import compile_kernel, pack_executable
    from tests.hal_vulkan.test_vulkan_texel_windows import row_sum, windowed

    out = []
    for profile in ("default", "llvmpipe"):
        static = irtk.compile_str(_ADD.format(n=ELEMENTS), target="vulkan-spirv",
                                  vulkan_target=profile)
        dynamic = irtk.compile_str(_DYNAMIC_ADD, target="vulkan-spirv", vulkan_target=profile)
        out.append(Sample(f"add-{profile}", _executable_of(static), (-(-ELEMENTS // 64), 1, 1),
                          ()))
        out.append(Sample(f"dynamic-add-{profile}", _executable_of(dynamic),
                          (-(-ELEMENTS // 64), 1, 1), (ELEMENTS,)))
    kernel = compile_kernel(row_sum(64, 512), windowed())
    out.append(Sample("row-sum-windows", pack_executable([kernel], windowed()),
                      kernel.workgroup_count, (), 64 * 512))
    return tuple(out)


# -- mutations --------------------------------------------------------------------------------

def _pack(root: Any) -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.Finish(root.Pack(builder), file_identifier=VULKAN_EXECUTABLE_IDENTIFIER)
    return bytes(builder.Output())


def _word(rng: random.Random) -> int:
    return rng.choice(_SPECIAL_WORDS) if rng.random() < 0.7 else rng.getrandbits(32)


def _spirv_word(root: Any, rng: random.Random) -> str:
    code = np.array(root.shaderModules[0].code, dtype="<u4")
    i = rng.randrange(5, len(code))
    code[i] = _word(rng)
    root.shaderModules[0].code = code
    return f"shader word {i} = 0x{int(code[i]):08x}"


def _local_size(root: Any, rng: random.Random) -> str:
    """Rewrite the LocalSize literals in the SPIR-V (OpExecutionMode %f LocalSize x y z)."""
    code = np.array(root.shaderModules[0].code, dtype="<u4")
    pos = 5
    while pos < len(code):
        count, opcode = int(code[pos]) >> 16, int(code[pos]) & 0xFFFF
        if opcode == 16 and count == 6 and int(code[pos + 2]) == 17:  # ExecutionMode LocalSize
            axis = rng.randrange(3)
            code[pos + 3 + axis] = rng.choice((0, 1024, 1 << 20, 0x7FFFFFFF, 0xFFFFFFFF))
            root.shaderModules[0].code = code
            return f"shader LocalSize[{axis}] = {int(code[pos + 3 + axis])}"
        pos += max(count, 1)
    return "no LocalSize"


def _entry_field(root: Any, rng: random.Random) -> str:
    entry = root.entryPoints[0]
    choice = rng.randrange(6)
    if choice == 0:
        name = entry.name.decode() if isinstance(entry.name, bytes) else str(entry.name)
        entry.name = rng.choice(["", "main", name + "x", name.upper(), "\u00e9" * 3])
        return f"entry name = {entry.name!r}"
    if choice == 1:
        entry.shaderModule = _word(rng)
        return f"shader_module = {entry.shaderModule}"
    if choice == 2:
        size = [int(x) for x in entry.workgroupSize]
        size[rng.randrange(3)] = _word(rng)
        entry.workgroupSize = size
        return f"workgroup_size = {entry.workgroupSize}"
    if choice == 3:
        entry.pushConstantCount = rng.choice((0, 1, 2, 63, 64, 65, _word(rng)))
        return f"push_constant_count = {entry.pushConstantCount}"
    if choice == 4:
        if entry.bindings:
            del entry.bindings[rng.randrange(len(entry.bindings))]
        if rng.random() < 0.3:
            entry.bindings = []
        return f"{len(entry.bindings)} bindings"
    extra = ve.BindingDefT()
    extra.binding = rng.choice((len(entry.bindings), 7, 0xFFFFFFFF))
    entry.bindings.append(extra)
    return f"extra binding {extra.binding}"


def _binding_field(root: Any, rng: random.Random) -> str:
    bindings = root.entryPoints[0].bindings
    j = rng.randrange(len(bindings))
    b = bindings[j]
    name = rng.choice(["binding", "readOnly", "kind", "windowCount", "windowTexels"])
    if name == "readOnly":
        b.readOnly = not b.readOnly
    elif name == "kind":
        b.kind = 1 - b.kind if rng.random() < 0.8 else rng.randrange(256)
    elif name == "binding":
        b.binding = rng.choice((b.binding + 1, b.binding + 5, 0xFFFFFFFF, _word(rng)))
    else:
        setattr(b, name, rng.choice((0, 1, 2, getattr(b, name) // 2, getattr(b, name) * 2,
                                     _word(rng))))
    return f"bindings[{j}].{name} = {getattr(b, name)}"


def _requirement_field(root: Any, rng: random.Random) -> str:
    req = root.requirements
    names = [n for n in vars(req) if not n.startswith("_")]
    name = rng.choice(names)
    value = getattr(req, name)
    setattr(req, name, (not value) if isinstance(value, bool) else rng.choice((0, _word(rng))))
    return f"requirements.{name} = {getattr(req, name)}"


_STRUCTURED: list[Callable[[Any, random.Random], str]] = [
    _spirv_word, _spirv_word, _local_size, _entry_field, _binding_field, _binding_field,
    _requirement_field]


def mutate(sample: Sample, rng: random.Random) -> tuple[str, bytes]:
    """One mutation of `sample`: (what changed, the executable)."""
    if rng.random() < 0.25:
        data = bytearray(sample.data)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return "bytes", bytes(data)
    root = ve.ExecutableDefT.InitFromPackedBuf(sample.data, 0)
    what = rng.choice(_STRUCTURED)(root, rng)
    return what, _pack(root)


# -- running ----------------------------------------------------------------------------------

def exercise(device: Any, sample: Sample, data: bytes) -> None:
    """Load `data` and, if accepted, dispatch it as `sample` over in-bounds buffers and wait.
    An irtk.Error at any step is a correct refusal; anything else propagates."""
    try:
        exe = device.create_executable("vulkan-spirv-fb", data)
    except Error:
        return
    try:
        buffers = [device.allocator.allocate_with_data(
            np.random.default_rng(i).random(sample.elements, dtype=np.float32).tobytes())
            for i in range(max(exe.exports[0].binding_count, 0))]
        cb = device.create_command_buffer()
        cb.dispatch(exe, 0, sample.workgroups, list(sample.constants),
                    [BindingRef(b, 0, -1) for b in buffers])
        cb.finalize()
        done = Fence([(device.create_semaphore(0), 1)])
        device.queue_execute(Fence(), done, [cb])
        done.wait(30.0)
    except Error:
        pass
    finally:
        exe.release()


def campaign(device: Any, count: int, seed: int, current: Path | None = None) -> list[str]:
    """Try `count` mutations of every sample; the descriptions of those that escaped."""
    rng = random.Random(seed)
    escaped = []
    for i in range(count):
        sample = samples()[i % len(samples())]
        what, data = mutate(sample, rng)
        if current is not None:
            current.write_bytes(sample.name.encode() + b"\n" + data)
        try:
            exercise(device, sample, data)
        except Exception:
            path = save(sample, data)
            escaped.append(f"{sample.name}: {what} ({path.name}): {traceback.format_exc(limit=4)}")
    return escaped


def save(sample: Sample, data: bytes) -> Path:
    """Keep an input that found a bug, named after its sample, for the suite to replay."""
    CORPUS.mkdir(exist_ok=True)
    path = CORPUS / f"{sample.name}-{hashlib.sha256(data).hexdigest()[:12]}.irvk"
    path.write_bytes(data)
    return path


def corpus_sample(path: Path) -> Sample:
    """The sample a corpus file was made from (its name's prefix)."""
    for sample in sorted(samples(), key=lambda s: -len(s.name)):
        if path.name.startswith(sample.name + "-"):
            return sample
    raise ValueError(f"{path.name} names no sample")


def main(argv: list[str]) -> int:
    """Child-process entry: DEVICE_INDEX COUNT SEED CURRENT_FILE. Replays the corpus, then runs
    the campaign, on a device without the validation layer; exit 1 if any input escaped."""
    from hal_vulkan.driver import create_driver

    index, count, seed, current = int(argv[0]), int(argv[1]), int(argv[2]), Path(argv[3])
    driver = create_driver(validation=False)
    device = driver.create_device(index)
    try:
        escaped = []
        for path in sorted(CORPUS.glob("*.irvk")):  # what found bugs before, first
            data = path.read_bytes()
            current.write_bytes(corpus_sample(path).name.encode() + b"\n" + data)
            try:
                exercise(device, corpus_sample(path), data)
            except Exception:
                escaped.append(f"{path.name}: {traceback.format_exc(limit=4)}")
        escaped += campaign(device, count, seed, current)
    finally:
        device.release()
        driver.release()
    current.unlink(missing_ok=True)
    for line in escaped:
        print(line, file=sys.stderr)
    return 1 if escaped else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
