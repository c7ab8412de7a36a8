"""The package boundaries of DESIGN.md, and no import cycles, checked on the source.

Every `import` counts, wherever it stands (module level, inside a function, or under
`TYPE_CHECKING`): a function-local import that dodges a cycle at run time is still a cycle in
the design, and the reader still has to hold both modules in mind at once.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("irtk", "spirv", "hal_vulkan", "hal_cpu", "schemas")

# Leaf modules every layer of irtk (and both drivers) may import: errors, the scalar types and
# the kernel body ops.
LEAVES = {"irtk.errors", "irtk.types", "irtk.body_ops", "irtk.tracing"}
# Which layers a layer may import (besides itself and LEAVES). A layer is a top-level package, or a
# subpackage/module of irtk. DESIGN.md, "Packages".
_RUNTIME = {"irtk.errors", "irtk.hal", "irtk.vm", "irtk.modules", "schemas"}
ALLOWED: dict[str, set[str]] = {
    "spirv": set(),
    "schemas": set(),
    "irtk.errors": set(),
    "irtk.types": set(),
    "irtk.body_ops": set(),
    "irtk.tracing": set(),
    "irtk.hal": {"irtk.errors"},
    "irtk.vm": {"irtk.errors", "schemas"},
    "irtk.modules": {"irtk.errors", "irtk.hal", "irtk.vm"},
    "irtk.runtime": {"irtk.errors", "irtk.hal", "irtk.vm", "irtk.modules"},
    "hal_cpu": {"irtk.errors", "irtk.hal", "schemas"},
    # spirv: the driver validates and reflects every shader before Vulkan sees it
    # (docs/architecture.md).
    "hal_vulkan": {"irtk.errors", "irtk.hal", "schemas", "spirv"},
    # irtk.modules: the ref type names of the `types` table come from the modules that register
    # them (docs/architecture.md).
    # irtk.runtime: constant evaluation runs its programs on the local-sync CPU driver at
    # compile time, as IREE's compiler runs its const-eval programs (docs/architecture.md).
    "irtk.compiler": {"irtk.errors", "irtk.hal", "irtk.vm", "irtk.modules", "irtk.runtime",
                      "schemas", "spirv"},
    # Model importers write MLIR for the compiler; torch-mlir, torch and onnx are optional.
    "irtk.importers": {"irtk.errors", "irtk.compiler", "irtk.runtime"},
    "irtk.dump": {"irtk.errors", "irtk.vm", "schemas", "spirv"},
    "irtk.check_runner": _RUNTIME | {"irtk.runtime"},
    "irtk.cli": _RUNTIME | {"irtk.runtime", "irtk.compiler", "irtk.check_runner", "irtk.dump",
                            "irtk.importers"},
    "irtk": {"irtk.errors", "irtk.runtime", "irtk.compiler", "irtk.importers"},
}


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (a package's own parents excluded)."""
    mods = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in mods}
    for module, path in mods.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    parts = parts[:len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([base] if base else []))
                # `from pkg import module` imports the module; `from module import name`
                # the module itself.
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                         for a in node.names]
            for name in names:
                target = resolve(name)
                if target and target != module and not module.startswith(target + "."):
                    graph[module].add(target)
    return graph


def layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "irtk" and len(parts) > 1:
        return ".".join(parts[:2])
    return parts[0]


def cycles(graph: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[tuple[str, ...]] = set()
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        found.add(tuple(sorted(component)))
    return found


def test_layers_import_only_what_design_allows() -> None:
    graph = import_graph()
    violations = set()
    for module, targets in graph.items():
        allowed = ALLOWED[layer(module)]
        if layer(module) not in ("spirv", "schemas"):
            allowed = allowed | LEAVES
        for target in targets:
            if layer(target) != layer(module) and layer(target) not in allowed:
                violations.add((module, target))
    assert not violations, "imports across layers that DESIGN.md does not allow:\n" + \
        "\n".join(f"  {m} -> {t}" for m, t in sorted(violations))


def test_no_import_cycles() -> None:
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join("  " + " <-> ".join(c)
                                                  for c in sorted(found))


def test_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == {("a", "b", "c")}
