"""`irtk dump`: what a module holds — the VM side in the VM assembly syntax (`irtk vm-dis`,
docs/vm.md), then the device executables it carries, per target, as `//` comment lines.

Large rodata segments (the executables) are elided by default; with every byte shown the whole
dump assembles back into the module with `irtk vm-as`.
"""
from __future__ import annotations

from pathlib import Path

from irtk.errors import InputError, VerificationError
from schemas import CPU_EXECUTABLE_FORMAT, VULKAN_EXECUTABLE_FORMAT
from schemas import bytecode_module as bfb
from schemas import cpu_executable as cfb
from schemas import vulkan_executable as vfb


def dump_module(path: str, rodata_limit: int | None = 64) -> str:
    """The dump text; rodata segments over `rodata_limit` bytes are elided (None: none)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise InputError(f"cannot read '{path}': {e.strerror}") from None
    from irtk.vm.disassembler import disassemble_module
    text = disassemble_module(data, rodata_limit=rodata_limit)
    return text + _executables(data)


def module_metadata(path: str) -> str:
    """`irtk dump --metadata`: the module's name and format, who built it and how, its exports
    with readable signatures and its executables by target (the module is verified first)."""
    from irtk.vm import load_module
    m = load_module(path)
    lines = [f"module @{m.name} (irtk module format {m.version})"]
    meta = dict(m.metadata)
    if meta:
        built = [f"{meta.pop('producer', 'an unknown producer')}"]
        for key, label in (("targets", "targets"), ("vulkan_target", "Vulkan profile"),
                           ("source", "from")):
            if key in meta:
                built.append(f"{label} {meta.pop(key)}")
        if meta.get("partial") == "true":
            built.append("partial (functions that did not compile are stubs)")
        meta.pop("partial", None)
        built += [f"{k} {v}" for k, v in meta.items()]
        lines.append("built by: " + ", ".join(built))
    else:
        lines.append("built by: not recorded")
    lines.append("exports:")
    for e in m.exports:
        function = m.functions[e.function] \
            if 0 <= e.function < len(m.functions) else None
        if "abi.args" in e.reflection or "abi.results" in e.reflection:
            args = ", ".join(t for t in e.reflection.get("abi.args", "").split(";") if t)
            results = ", ".join(t for t in e.reflection.get("abi.results", "").split(";") if t)
            lines.append(f"  {e.name}({args}) -> ({results})")
        else:
            cc = function.calling_convention if function is not None else "?"
            lines.append(f"  {e.name}: calling convention {cc}")
    executables = [seg for seg in m.rodata
                   if seg.mime_type in (VULKAN_EXECUTABLE_FORMAT, CPU_EXECUTABLE_FORMAT)]
    lines.append("executables:" if executables else "executables: none")
    for seg in executables:
        extra = ""
        if seg.mime_type == VULKAN_EXECUTABLE_FORMAT:
            blob = bytes(seg.data)
            if vfb.ExecutableDef.ExecutableDefBufferHasIdentifier(blob, 0):
                profile = vfb.ExecutableDef.GetRootAs(blob, 0).TargetProfile() or b"?"
                extra = f", profile {profile.decode(errors='replace')}"
        lines.append(f"  {seg.name} ({seg.mime_type}{extra}, {len(seg.data)} bytes)")
    return "\n".join(lines) + "\n"


def _executables(data: bytes) -> str:
    try:
        module = bfb.ModuleDef.GetRootAs(data, 0)
        lines = []
        for i in range(module.RodataSegmentsLength()):
            seg = module.RodataSegments(i)
            mime = (seg.MimeType() or b"").decode(errors="replace")
            name = (seg.Name() or b"").decode(errors="replace")
            blob = seg.DataAsNumpy().tobytes() if seg.DataLength() else b""
            if mime == VULKAN_EXECUTABLE_FORMAT:
                lines += [f"executable '{name}' ({mime}, {len(blob)} bytes)"]
                lines += _vulkan(blob)
            elif mime == CPU_EXECUTABLE_FORMAT:
                lines += [f"executable '{name}' ({mime}, {len(blob)} bytes)"]
                lines += _cpu(blob)
    except VerificationError:
        raise
    except Exception as e:  # a mangled file: the disassembler has already verified the module
        raise VerificationError(f"cannot read the module's executables: {e}") from None
    return ("\n// executables:\n" + "".join(f"//   {l}\n" for l in lines)) if lines else ""


def _vulkan(blob: bytes) -> list[str]:
    if not vfb.ExecutableDef.ExecutableDefBufferHasIdentifier(blob, 0):
        return ["  (not a Vulkan SPIR-V executable: bad identifier)"]
    exe = vfb.ExecutableDef.GetRootAs(blob, 0)
    out = [f"  target profile: {(exe.TargetProfile() or b'').decode()}"]
    req = exe.Requirements()
    if req is not None:
        needs = [n for n, v in (("float16", req.Float16()), ("float64", req.Float64()),
                                ("int8", req.Int8()), ("int16", req.Int16()),
                                ("int64", req.Int64())) if v]
        if req.SubgroupSize():
            needs.append(f"subgroup size {req.SubgroupSize()}")
        out.append(f"  requires: {', '.join(needs) or 'nothing beyond Vulkan 1.1'}")
    from spirv import reader
    for m in range(exe.ShaderModulesLength()):
        code = exe.ShaderModules(m).CodeAsNumpy().tobytes()
        out.append(f"  shader module {m}: {len(code)} bytes of SPIR-V")
        for ep in reader.entry_points(code):
            size = "x".join(map(str, ep.local_size)) if ep.local_size else "?"
            out.append(f"    entry point {ep.name} (local size {size})")
    for e in range(exe.EntryPointsLength()):
        ep = exe.EntryPoints(e)
        out.append(f"  export {e}: {(ep.Name() or b'').decode()} bindings={ep.BindingsLength()} "
                   f"push_constants={ep.PushConstantCount()}")
    return out


def _cpu(blob: bytes) -> list[str]:
    if not cfb.ExecutableDef.ExecutableDefBufferHasIdentifier(blob, 0):
        return ["  (not a CPU executable: bad identifier)"]
    exe = cfb.ExecutableDef.GetRootAs(blob, 0)
    out = []
    for k in range(exe.KernelsLength()):
        kd = exe.Kernels(k)
        ranges = "x".join(str(kd.LoopRanges(j)) for j in range(kd.LoopRangesLength()))
        out.append(f"  export {k}: {(kd.Name() or b'').decode()} loops={ranges or 'scalar'} "
                   f"ops={kd.OpsLength()} tile={kd.TileSize()}")
    return out
