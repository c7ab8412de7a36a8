"""Loading executables: exports, and VerificationError (naming kernel and field) for bad ones."""
from __future__ import annotations

import numpy as np
import pytest

from hal_cpu import create_sync_driver
from hal_cpu.executable import parse_kernels
from irtk.errors import DeviceError, VerificationError
from schemas import cpu_executable as fb

from .cpu_kernel_builder import NO_MAP, executable, kernel, op, operand


@pytest.fixture(scope="module")
def sync_device():
    dev = create_sync_driver().create_device()
    yield dev
    dev.release()


def _add_kernel(**changes) -> object:
    """out[i] = a[i] + b[i] over 10 iterations, with fields replaced by `changes`."""
    k = kernel("add", [10], [operand(0, "f32", [10], 1), operand(2, "f32", [10], 1)],
               [operand(5, "f32", [10], 1)], [op("arith.addf", 0, 1, result_type="f32")], [3],
               tile_size=4)
    for name, value in changes.items():
        setattr(k, name, value)
    return k


def test_exports_describe_each_kernel(sync_device):
    second = kernel("fill", [3, 4], [], [operand(0, "i32", [3, 4], 2)],
                    [op("arith.constant", result_type="i32", int_value=7)], [1], tile_size=5)
    exe = sync_device.create_executable("cpu-kernel-fb", executable(_add_kernel(), second))
    assert [(e.name, e.binding_count, e.push_constant_count, e.workgroup_size)
            for e in exe.exports] == [("add", 3, 0, (4, 1, 1)), ("fill", 1, 0, (5, 1, 1))]


def test_unknown_format_is_a_device_error(sync_device):
    with pytest.raises(DeviceError, match="spirv"):
        sync_device.create_executable("vulkan-spirv-fb", executable(_add_kernel()))


def test_wrong_file_identifier():
    with pytest.raises(VerificationError, match="IRCP"):
        parse_kernels(executable(_add_kernel(), identifier=b"IRVK"))
    with pytest.raises(VerificationError, match="IRCP"):
        parse_kernels(b"")


def _grid(*axes: tuple[list[int], int]) -> fb.GridDefT:
    defs = [fb.GridAxisDefT(dims=dims, divisor=divisor) for dims, divisor in axes]
    defs += [fb.GridAxisDefT(dims=[], divisor=1)] * (3 - len(defs))
    return fb.GridDefT(x=defs[0], y=defs[1], z=defs[2])


def _dynamic_add(grid: fb.GridDefT, tile_size: int) -> object:
    """out[i, j] = a[i, j] + 1 over a dynamic 2-d range."""
    return kernel("dyn", [-1, -1], [operand(0, "f32", [-1, -1], 2, dynamic_dims=[0, 1])],
                  [operand(1, "f32", [-1, -1], 2, dynamic_dims=[0, 1])],
                  [op("arith.addf", 0, 0, result_type="f32")], [2], tile_size=tile_size,
                  params=[("n", "index"), ("m", "index")], dynamic_loops=[0, 1], grid=grid)


def _ops_kernel(ops, yields=(3,), out_type="f32"):
    return kernel("k", [10], [operand(0, "f32", [10], 1), operand(1, "i32", [10], 1)],
                  [operand(2, out_type, [10], 1)], ops, list(yields))


BAD_KERNELS = {
    "no name": (_add_kernel(name=None), r"kernels\[0\]: name: is missing"),
    "negative loop": (_add_kernel(loopRanges=[-1]), r"'add': loop_ranges\[0\]"),
    "zero tile": (_add_kernel(tileSize=0), "'add': tile_size: is 0"),
    "bad type": (kernel("k", [4], [operand(0, "f128", [4], 1)], [], [], []),
                 r"'k': inputs\[0\].element_type: 'f128'"),
    "map rank": (kernel("k", [4, 2], [operand(0, "f32", [4], 1)], [], [], []),
                 r"'k': inputs\[0\].map.num_dims: is 1, expected 2"),
    "map size": (kernel("k", [4], [operand(0, "f32", [4, 1], 1, [[1, 0]])], [], [], []),
                 r"'k': inputs\[0\].map.coefficients: has 2 entries, expected 4"),
    "out of bounds": (kernel("k", [4], [], [operand(0, "f32", [4], 1, [[1, 1]])], [], [0]),
                      r"'k': outputs\[0\].map: row 0 reaches indices \[1, 4\]"),
    "negative index": (kernel("k", [4], [operand(0, "f32", [8], 1, [[-1, 2]])], [], [], []),
                       r"row 0 reaches indices \[-1, 2\]"),
    "unknown op": (_ops_kernel([op("arith.frobf", 0, result_type="f32")]),
                   r"'k': ops\[0\] \(arith.frobf\): unsupported op"),
    "forward ref": (_ops_kernel([op("arith.addf", 0, 3, result_type="f32")]),
                    r"ops\[0\] \(arith.addf\).operands\[1\]: value 3 is not defined"),
    "type mismatch": (_ops_kernel([op("arith.addf", 0, 1, result_type="f32")]),
                      r"operand types \(f32, i32\) are not one float type"),
    "result type": (_ops_kernel([op("arith.addf", 0, 0, result_type="i32")]),
                    r"result_type 'i32' should be 'f32'"),
    "arity": (_ops_kernel([op("math.exp", 0, 0, result_type="f32")]), "has 2 operands"),
    "predicate": (_ops_kernel([op("arith.cmpf", 0, 0, predicate="sgt")], out_type="i1"),
                  "predicate 'sgt'"),
    "constant range": (_ops_kernel([op("arith.constant", result_type="i32", int_value=2 ** 33)],
                                   out_type="i32"), "does not fit in i32"),
    "index dim": (_ops_kernel([op("linalg.index", int_value=1)], out_type="i32"),
                  r"loop dimension 1 is not in \[0, 1\)"),
    "yield count": (_ops_kernel([], yields=[0, 1]), "yields: has 2 values for 1 outputs"),
    "yield type": (_ops_kernel([], yields=[1]), r"yields\[0\]: value 1 is i32"),
    "yield undefined": (_ops_kernel([], yields=[9]), r"yields\[0\]: value 9 is not defined"),
    "binding": (kernel("k", [4], [operand(2 ** 20, "f32", [4], 1)], [], [], []),
                r"inputs\[0\].binding: 1048576 is out of range"),
    # The host launches the grid's count: a tile smaller than the grid assumes leaves points
    # uncovered.
    "tile below the grid": (_add_kernel(grid=_grid(([0], 4)), tileSize=2),
                            r"'add': grid: launches 3 workgroup\(s\) of tile_size 2: 6 of "
                            r"the 10 parallel points"),
    "grid skips a loop": (_dynamic_add(_grid(([0], 1)), 64),
                          r"'dyn': grid: no axis counts parallel loop\(s\) \[1\]"),
    "grid divisors": (_dynamic_add(_grid(([0], 8), ([1], 16)), 64),
                      r"'dyn': grid: its divisors multiply to 128, more than tile_size 64"),
}


@pytest.mark.parametrize("case", list(BAD_KERNELS))
def test_inconsistent_kernel_is_rejected_naming_kernel_and_field(case):
    k, message = BAD_KERNELS[case]
    with pytest.raises(VerificationError, match=message):
        parse_kernels(executable(k))


def test_grids_that_cover_every_point_load():
    parse_kernels(executable(_add_kernel(grid=_grid(([0], 4)))))
    parse_kernels(executable(_dynamic_add(_grid(([0, 1], 64)), 64)))
    parse_kernels(executable(_dynamic_add(_grid(([1], 8), ([0], 8)), 64)))


def test_duplicate_kernel_names_and_empty_executables_are_rejected():
    with pytest.raises(VerificationError, match="'add' is used twice"):
        parse_kernels(executable(_add_kernel(), _add_kernel()))
    with pytest.raises(VerificationError, match="no kernels"):
        parse_kernels(executable())


def test_corrupted_bytes_raise_only_verification_errors(rng):
    good = executable(_add_kernel(), _ops_kernel([op("arith.addf", 0, 0, result_type="f32")]))
    assert len(parse_kernels(good)) == 2
    outcomes = {"loaded": 0, "rejected": 0}
    for trial in range(400):
        data = bytearray(good)
        if trial % 4 == 0:
            data = data[:int(rng.integers(0, len(data)))]
        else:
            for _ in range(int(rng.integers(1, 4))):
                pos = int(rng.integers(8, len(data)))  # keep the identifier: reach the parser
                data[pos] = int(rng.integers(0, 256))
        try:
            parse_kernels(bytes(data))
            outcomes["loaded"] += 1
        except VerificationError:
            outcomes["rejected"] += 1
    assert outcomes["rejected"] > 0


def test_degenerate_but_consistent_kernels_load(sync_device):
    empty_loop = kernel("nothing", [0, 5], [], [operand(0, "f32", [0, 5], 2)], [], [0])
    scalar = kernel("scalar", [], [operand(0, "f32", [], 0, [])], [operand(1, "f32", [], 0, [])],
                    [op("math.exp", 0, result_type="f32")], [2], tile_size=1)
    exe = sync_device.create_executable("cpu-kernel-fb", executable(empty_loop, scalar))
    assert [k.iteration_end((9, 1, 1)) for k in exe.kernels] == [0, 1]
    np.testing.assert_equal(exe.exports[1].binding_count, 2)


# --- the wider contract: reductions, params, gathers, dynamic extents -------------------------

def fb_param(name: str, t: str, offset: int) -> fb.ParamDefT:
    return fb.ParamDefT(name=name, type=t, offset=offset)


def _rich_kernel(**changes) -> object:
    """out[i] = sum_j a[i, j] * table[idx[i]] over loops (i parallel, j reduction), with a
    dynamic row count `n` and a scale param."""
    k = kernel("rich", [0, 8],
               [operand(0, "f32", [0, 8], 2, dynamic_dims=[0, -1]),
                operand(1, "i32", [0], 2, [[1, 0, 0]], dynamic_dims=[0]),
                operand(2, "bf16", [16], 2, NO_MAP)],
               [operand(3, "f32", [0], 2, [[1, 0, 0]], dynamic_dims=[0])],
               [op("tensor.extract", 1, result_type="bf16", int_value=2),
                op("arith.extf", 4, result_type="f32"),
                op("kernel.param", result_type="f32", int_value=1),
                op("arith.mulf", 0, 5, result_type="f32"),
                op("arith.mulf", 7, 6, result_type="f32"),
                op("arith.addf", 3, 8, result_type="f32")], [9], tile_size=4,
               iterators="pr", params=[("n", "index"), ("scale", "f32")], dynamic_loops=[0, -1])
    for name, value in changes.items():
        setattr(k, name, value)
    return k


def test_rich_kernel_loads_with_its_push_constants(sync_device):
    exe = sync_device.create_executable("cpu-kernel-fb", executable(_rich_kernel()))
    (k,) = exe.kernels
    assert k.iterator_types == ("parallel", "reduction") and k.push_constant_bytes == 8
    assert exe.exports[0].push_constant_count == 2


WIDE_BAD = {
    "iterator code": (_rich_kernel(iteratorTypes=[0, 2]), r"iterator_types: \[0, 2\]"),
    "iterator count": (_rich_kernel(iteratorTypes=[0]), "has 1 entries for 2 loops"),
    "output on reduction": (
        kernel("k", [4, 3], [operand(0, "f32", [4, 3], 2)], [operand(1, "f32", [4, 3], 2)],
               [], [0], iterators="pr"),
        r"outputs\[0\].map: row 1 uses loop 1, a reduction loop"),
    "output gather": (kernel("k", [4], [], [operand(0, "f32", [4], 1, NO_MAP)], [], [0]),
                      r"outputs\[0\].map: is missing"),
    "extract of mapped": (
        kernel("k", [4], [operand(0, "f32", [4], 1)], [operand(1, "f32", [4], 1)],
               [op("linalg.index", int_value=0),
                op("tensor.extract", 2, result_type="f32", int_value=0)], [3]),
        "input 0 is not a gather input"),
    "gather read directly": (
        kernel("k", [4], [operand(0, "f32", [4], 1, NO_MAP)], [operand(1, "f32", [4], 1)],
               [op("arith.negf", 0, result_type="f32")], [2]),
        "value 0 is gather input 0"),
    "extract rank": (_rich_kernel(ops=[op("tensor.extract", result_type="bf16", int_value=2)],
                                  yields=[5]), "has 0 indices for a rank-1 input"),
    "param offset": (_rich_kernel(params=[fb_param("n", "index", 0), fb_param("s", "f32", 8)]),
                     r"params\[1\].offset: is 8, expected 4"),
    "param type": (_rich_kernel(params=[fb_param("n", "u32", 0)]), "'u32' is not one of"),
    "extent param type": (_rich_kernel(params=[fb_param("n", "f32", 0),
                                               fb_param("s", "f32", 4)]),
                          "an extent must be an index param"),
    "extent param missing": (_rich_kernel(dynamicLoopRanges=[5, -1]), "param 5 does not exist"),
    "symbols": (kernel("k", [4], [operand(0, "f32", [8], 1, [[1, 1, 0]], num_symbols=1)],
                       [], [], [], params=[("a", "index"), ("b", "index")]),
                "num_symbols: is 1, expected 0 or 2"),
    "param result": (_rich_kernel(ops=[op("kernel.param", result_type="i32", int_value=1)],
                                  yields=[5]), "'i32' should be f32"),
}


@pytest.mark.parametrize("case", list(WIDE_BAD))
def test_wider_contract_violations_are_rejected(case):
    k, message = WIDE_BAD[case]
    with pytest.raises(VerificationError, match=message):
        parse_kernels(executable(k))


def test_fuzzed_rich_executables_raise_only_verification_errors(rng):
    good = executable(_rich_kernel(), _add_kernel())
    assert len(parse_kernels(good)) == 2
    rejected = 0
    for trial in range(500):
        data = bytearray(good)
        if trial % 5 == 0:
            data = data[:int(rng.integers(0, len(data)))]
        else:
            for _ in range(int(rng.integers(1, 5))):
                data[int(rng.integers(8, len(data)))] = int(rng.integers(0, 256))
        try:
            parse_kernels(bytes(data))
        except VerificationError:
            rejected += 1
    assert rejected > 0
