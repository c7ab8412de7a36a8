"""Every conformance program parses, and every function imports into TIR (or is one of the few
the importer rightly refuses, with a located message)."""
from __future__ import annotations

import re

import pytest

from irtk.compiler import tir
from irtk.compiler.frontend import parse_mlir, parse_program
from tests.compiler.frontend import suite

FILES = suite.files()


def test_the_suite_is_there():
    assert len(FILES) == 41


@pytest.mark.parametrize("name", FILES)
def test_parses(name):
    module, source_map = parse_mlir(suite.read(name), name)
    assert any(op.name == "func.func" for op in module.ops)


@pytest.mark.parametrize("name", FILES)
def test_imports(name):
    program = parse_program(suite.read(name), name)
    for fn_name, message in program.unsupported.items():
        assert fn_name in suite.UNSUPPORTED, message
        assert re.match(rf"{re.escape(name)}:\d+:\d+: error: ", message), message
        assert suite.UNSUPPORTED[fn_name] in message
    for fn in program.functions:
        assert fn.name not in suite.UNSUPPORTED
        assert fn.location.startswith(f"{name}:")
        for op in tir.walk(fn.body):
            assert re.match(rf"{re.escape(name)}:\d+:\d+$", op.location), (op.kind, op.location)
            if op.kind == "generic":
                _check_generic(op)


def _check_generic(op: tir.Op) -> None:
    """The contract of tir.py / kernel.py holds for every generic the importer makes."""
    from irtk.compiler import kernel
    n_in, n_cap = op.attrs["num_inputs"], op.attrs["num_captures"]
    n_out = len(op.operands) - n_in - n_cap
    assert n_out == len(op.results) == len(op.attrs["yields"]) >= 1
    maps = op.attrs["maps"]
    assert len(maps) == n_in + n_out
    n = len(op.attrs["iterator_types"])
    reduction = {d for d, t in enumerate(op.attrs["iterator_types"]) if t == "reduction"}
    for k, (v, m) in enumerate(zip(op.operands, maps)):
        assert isinstance(v.type, tir.TensorType)
        if m is None:
            assert k < n_in, "an output without a map"
            continue
        assert m.num_dims == n and m.num_symbols == 0 and len(m.rows) == len(v.type.shape)
        if k >= n_in:
            assert not (m.used_dims() & reduction)
    for v in op.operands[n_in + n_out:]:
        assert isinstance(v.type, tir.ScalarType)
    # Every row that is a bare loop index (coefficient 1, constant 0) indexes a dim of exactly
    # that loop's extent: consumers infer loop ranges from such rows.
    extents: dict[int, set] = {}
    for v, m in zip(op.operands, maps):
        for r, row in enumerate(m.rows if m is not None else ()):
            nz = [j for j in range(n) if row[j]]
            if len(nz) == 1 and row[nz[0]] == 1 and row[-1] == 0 and v.type.shape[r] is not None:
                extents.setdefault(nz[0], set()).add(v.type.shape[r])
    assert all(len(e) == 1 for e in extents.values()), (op.location, extents)
    # Validate the body with the kernel IR's own rules (extents are irrelevant here).
    operands = [kernel.Operand(i, v.type.element_type, tuple(d or 1 for d in v.type.shape), m)
                for i, (v, m) in enumerate(zip(op.operands, maps))]
    params = tuple(kernel.Param(f"p{i}", v.type.name)
                   for i, v in enumerate(op.operands[n_in + n_out:]))
    kernel.Kernel("k", tuple([1] * n), operands[:n_in], operands[n_in:], op.attrs["ops"],
                  op.attrs["yields"], tuple(op.attrs["iterator_types"]), params).validate()


def test_unsupported_functions_do_not_take_their_file_down():
    source = (
        "func.func @good() -> tensor<4xf32> {\n"
        "  %0 = arith.constant dense<1.0> : tensor<4xf32>\n"
        "  return %0 : tensor<4xf32>\n"
        "}\n"
        "func.func @bad() -> tensor<4xcomplex<f32>> {\n"
        "  %0 = tensor.empty() : tensor<4xcomplex<f32>>\n"
        "  return %0 : tensor<4xcomplex<f32>>\n"
        "}\n")
    program = parse_program(source, "two.mlir")
    assert set(program.unsupported) == {"bad"}
    assert re.match(r"two\.mlir:\d+:\d+: error: ", program.unsupported["bad"])
    assert [fn.name for fn in program.functions] == ["good"], "the file's other function imports"
