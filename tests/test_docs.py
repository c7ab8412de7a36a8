"""The docs' examples run: each Python block of docs/python.md, in order, in one namespace (a
block may use what an earlier one defined)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```$", path.read_text(), re.S | re.M)


def test_the_python_api_examples_run():
    blocks = python_blocks(ROOT / "docs" / "python.md")
    assert len(blocks) >= 6
    namespace: dict[str, object] = {}
    for i, block in enumerate(blocks):
        code = compile(block, f"docs/python.md (example {i + 1})", "exec")
        exec(code, namespace)  # noqa: S102 - the project's own documentation


def cli_steps(path: Path) -> tuple[dict[str, str], list[tuple[str, list[str] | None]]]:
    """The files docs/cli.md defines (`<!-- file: NAME -->` before a block) and its shell
    commands in order, each with the output it shows (`$ command` lines) or None."""
    text = path.read_text()
    files = {name: body for name, body in
             re.findall(r"^<!-- file: (\S+) -->\n```\w*\n(.*?)^```$", text, re.S | re.M)}
    steps: list[tuple[str, list[str] | None]] = []
    for block in re.findall(r"^```sh\n(.*?)^```$", text, re.S | re.M):
        lines = block.splitlines()
        if lines and lines[0].startswith("$ "):
            for line in lines:
                if line.startswith("$ "):
                    steps.append((line[2:], []))
                else:
                    output = steps[-1][1]
                    assert output is not None
                    output.append(line)
        else:
            steps += [(re.sub(r"\s+#.*$", "", line), None) for line in lines if line.strip()]
    return files, steps


def test_the_cli_examples_run_and_print_what_they_show(tmp_path):
    import shlex
    import subprocess
    import sys

    from tests.conftest import vulkan_device_uris
    files, steps = cli_steps(ROOT / "docs" / "cli.md")
    assert {"prog.mlir", "scale.mlir"} <= set(files) and len(steps) >= 10
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    has_vulkan = bool(vulkan_device_uris())
    for command, expected in steps:
        words = shlex.split(command)
        assert words[0] == "irtk", command
        if not has_vulkan and ("vulkan" in command or
                               any(w.startswith("prog.vmfb") for w in words)):
            continue   # the Vulkan examples need a Vulkan device
        stdout = None
        if ">" in words:
            at = words.index(">")
            stdout = open(tmp_path / words[at + 1], "wb")   # noqa: SIM115 - closed below
            words = words[:at]
        try:
            p = subprocess.run([sys.executable, "-m", "irtk.cli", *words[1:]], cwd=tmp_path,
                               stdout=stdout or subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=300)
        finally:
            if stdout is not None:
                stdout.close()
        assert p.returncode == 0, f"{command}\n{p.stderr.decode()}"
        if expected is not None:
            assert p.stdout.decode().splitlines() == expected, command
    assert not has_vulkan or (tmp_path / "trace.json").stat().st_size > 0
    assert (tmp_path / "prog-cpu.vmfb").read_bytes()[4:8] == b"IRTK"
