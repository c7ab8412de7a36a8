"""`irtk vm-as` / `irtk vm-dis`, and `irtk dump` showing the same assembly syntax."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_cli import EXAMPLE, assert_user_error, irtk

PROGRAM = """// sum of 1..n
module @sum
export @main = @main {abi.args = "i32", abi.results = "i32"}
func @main "0i_i" registers(i32 5) {
    i32:1 = const.i32 0
    i32:2 = const.i32 1
  ^loop:
    i32:3 = cmp.lte.s.i32 i32:2, i32:0
    cond_br i32:3, ^body, ^done
  ^body:
    i32:1 = add.i32 i32:1, i32:2
    i32:4 = const.i32 1
    i32:2 = add.i32 i32:2, i32:4
    br ^loop
  ^done:
    return (i32:1)
}
"""


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("vmtools") / "example.vmfb"
    p = irtk("compile", str(EXAMPLE), "--target=cpu", "-o", str(out))
    assert p.returncode == 0, p.stderr
    return out


def test_assemble_run_and_disassemble(tmp_path):
    src = tmp_path / "sum.vmasm"
    src.write_text(PROGRAM)
    out = tmp_path / "sum.vmfb"
    p = irtk("vm-as", str(src), "-o", str(out))
    assert p.returncode == 0, p.stderr
    run = irtk("run", str(out), "--device=local-sync", "--input=i32=10")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[-1].endswith("=55")
    dis = irtk("vm-dis", str(out))
    assert dis.returncode == 0, dis.stderr
    assert dis.stdout.startswith("module @sum  // format version ")
    assert "    cond_br i32:3, ^" in dis.stdout
    # the listing assembles back into the same file
    again = tmp_path / "again.vmfb"
    (tmp_path / "listing.vmasm").write_text(dis.stdout)
    p = irtk("vm-as", str(tmp_path / "listing.vmasm"), "-o", str(again))
    assert p.returncode == 0, p.stderr
    assert again.read_bytes() == out.read_bytes()


def test_a_compiled_module_round_trips_through_text(compiled, tmp_path):
    text = tmp_path / "example.vmasm"
    p = irtk("vm-dis", str(compiled), "-o", str(text))
    assert p.returncode == 0 and p.stdout == "", p.stderr
    back = tmp_path / "back.vmfb"
    p = irtk("vm-as", str(text), "-o", str(back))
    assert p.returncode == 0, p.stderr
    assert back.read_bytes() == compiled.read_bytes()


def test_dump_prints_the_vm_disassembly_syntax(compiled):
    dump = irtk("dump", str(compiled))
    dis = irtk("vm-dis", str(compiled))
    assert dump.returncode == 0 and dis.returncode == 0
    # the function listings are the same lines in both
    body = dis.stdout[dis.stdout.index("\nfunc "):]
    assert body.strip() in dump.stdout
    assert 'rodata @executable_cpu "cpu-kernel-fb" elided(' in dump.stdout
    assert "// executables:" in dump.stdout
    full = irtk("dump", "--rodata", str(compiled))
    assert full.stdout.startswith(dis.stdout)


def test_assembly_errors_name_file_line_and_column(tmp_path):
    src = tmp_path / "bad.vmasm"
    src.write_text(PROGRAM.replace("i32:1 = add.i32 i32:1, i32:2", "i32:1 = add.i32 i32:1, f32:2"))
    out = tmp_path / "bad.vmfb"
    p = irtk("vm-as", str(src), "-o", str(out))
    assert_user_error(p, f"{src}:11:28: error: expected an i32 register, found f32:2")
    assert not out.exists()


def test_a_module_the_verifier_rejects_is_not_written(tmp_path):
    src = tmp_path / "bad.vmasm"
    src.write_text(PROGRAM.replace("return (i32:1)", "return (i32:9)"))
    p = irtk("vm-as", str(src), "-o", str(tmp_path / "bad.vmfb"))
    # the assembler writes what it is told; loading it names function and offset
    assert p.returncode == 0, p.stderr
    run = irtk("run", str(tmp_path / "bad.vmfb"), "--device=local-sync", "--input=i32=1")
    assert_user_error(run, "function 'main' at offset ")
    assert "register i32:9 out of range (5 registers)" in run.stderr


def test_missing_and_mangled_inputs_are_user_errors(tmp_path):
    assert_user_error(irtk("vm-as", str(tmp_path / "nope.vmasm"), "-o", str(tmp_path / "x")),
                      "cannot read the file")
    assert_user_error(irtk("vm-dis", str(tmp_path / "nope.vmfb")), "no such file")
    junk = tmp_path / "junk.vmfb"
    junk.write_bytes(b"\x01" * 40)
    assert_user_error(irtk("vm-dis", str(junk)), "not an irtk module")
