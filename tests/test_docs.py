"""The docs' examples run as written.

- Python blocks (```python) of each document, in order, in one namespace per document (a block
  may use what an earlier one defined), in a folder holding the files the document defines.
- Files: a block right after `<!-- file: NAME -->` is written to NAME before anything runs.
- Shell blocks (```sh) whose commands are `irtk ...`, in order, in that folder: each must
  succeed; a command shown as `$ irtk ...` must print exactly the lines that follow it.
  `irtk check` exits 1 exactly when it prints a [FAIL] line (docs/check.md, exit status).
  Blocks of other commands (the developer's pytest and scripts) are not run here.
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import vulkan_device_uris

ROOT = Path(__file__).resolve().parents[1]
# Each document with examples. They run in a fresh folder holding a copy of examples/ (the
# README's examples name files there) and the document's own files.
DOCUMENTS = ["README.md", "docs/check.md", "docs/cli.md", "docs/python.md", "docs/spirv.md",
             "docs/vm.md"]
Step = tuple[str, "list[str] | None"]


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", text, re.S | re.M)


def doc_files(text: str) -> dict[str, str]:
    return dict(re.findall(r"^<!-- file: (\S+) -->\n```\w*\n(.*?)^```$", text, re.S | re.M))


def shell_steps(text: str) -> list[Step]:
    """The `irtk` commands of the shell blocks in order, each with the output it shows (`$`
    commands) or None."""
    steps: list[Step] = []
    for block in re.findall(r"^```sh\n(.*?)^```$", text, re.S | re.M):
        lines = block.splitlines()
        first = lines[0].removeprefix("$ ") if lines else ""
        if not first.startswith("irtk "):
            continue
        if lines[0].startswith("$ "):
            for line in lines:
                if line.startswith("$ "):
                    steps.append((line[2:], []))
                else:
                    output = steps[-1][1]
                    assert output is not None
                    output.append(line)
        else:
            steps += [(re.sub(r"\s+#.*$", "", line), None) for line in lines if line.strip()]
    return steps


def _run_step(command: str, expected: list[str] | None, folder: Path) -> None:
    # The examples' caches stay in the folder (`irtk cache clear` must not touch the user's).
    env = {**os.environ, "IRTK_CACHE_DIR": str(folder / "cache")}
    words = shlex.split(command)
    assert words[0] == "irtk", command
    stdout = None
    if ">" in words:
        at = words.index(">")
        stdout = open(folder / words[at + 1], "wb")  # noqa: SIM115 - closed below
        words = words[:at]
    try:
        p = subprocess.run([sys.executable, "-m", "irtk.cli", *words[1:]], cwd=folder,
                           stdout=stdout or subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=300, env=env)
    finally:
        if stdout is not None:
            stdout.close()
    out = p.stdout.decode() if p.stdout is not None else ""
    failed = words[1] == "check" and "\n[FAIL] " in "\n" + out
    assert p.returncode == (1 if failed else 0), f"{command}\n{out}\n{p.stderr.decode()}"
    if expected is not None:
        assert out.splitlines() == expected, command


@pytest.mark.parametrize("document", DOCUMENTS)
def test_the_examples_of_each_document_run(document, tmp_path, monkeypatch):
    text = (ROOT / document).read_text()
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    for name, body in doc_files(text).items():
        (tmp_path / name).write_text(body)
    steps = shell_steps(text)
    blocks = python_blocks(text)
    assert steps or blocks, f"{document} has no examples: take it out of DOCUMENTS"
    if not vulkan_device_uris() and "vulkan" in text:
        pytest.skip("the examples use a Vulkan device")
    monkeypatch.chdir(tmp_path)
    for command, expected in steps:
        _run_step(command, expected, tmp_path)
    namespace: dict[str, object] = {}
    for i, block in enumerate(blocks):
        code = compile(block, f"{document} (example {i + 1})", "exec")
        exec(code, namespace)  # noqa: S102 - the project's own documentation


def test_the_documents_with_examples_are_all_run():
    with_examples = {str(p.relative_to(ROOT)) for p in [ROOT / "README.md",
                                                        *(ROOT / "docs").glob("*.md")]
                     if python_blocks(p.read_text()) or shell_steps(p.read_text())}
    assert with_examples == set(DOCUMENTS)


def test_the_cli_page_has_an_example_of_every_command_and_flag(tmp_path):
    from irtk.cli import _parser
    steps = shell_steps((ROOT / "docs" / "cli.md").read_text())
    steps += shell_steps((ROOT / "docs" / "check.md").read_text())
    written = " ".join(c for c, _ in steps)
    parser = _parser()
    sub = next(a for a in parser._actions if a.dest == "command")  # noqa: SLF001
    for action in parser._actions:  # noqa: SLF001 - irtk's own options (--version, -v)
        flags = [f for f in action.option_strings if f != "--help" and f != "-h"]
        if flags and action.dest != "command":
            assert any(f"irtk {f}" in written for f in flags), f"no example of irtk {flags[0]}"
    for name, command in sub.choices.items():   # type: ignore[union-attr]
        assert f"irtk {name}" in written, f"no example of irtk {name}"
        for action in command._actions:  # noqa: SLF001
            flags = [f for f in action.option_strings if f.startswith("--") and f != "--help"]
            if flags:
                assert any(f in written for f in flags), f"no example of irtk {name} {flags[0]}"
    assert any("--trace=" in c for c, _ in steps) and \
        any("--print_statistics" in c for c, _ in steps)
    assert {"prog.mlir", "scale.mlir"} <= set(doc_files((ROOT / "docs" / "cli.md").read_text()))
