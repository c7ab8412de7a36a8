"""The launch contract of CPU kernels under mutation: a compiled executable with its tile_size
or grid changed is either refused by the verifier or, dispatched with the workgroup count the
host program computes, produces the whole output. Before the grid proof, a smaller tile_size
left part of the output uncomputed without a word."""
from __future__ import annotations

import functools
import math
import random

import flatbuffers
import numpy as np
import pytest

from hal_cpu import create_sync_driver
from irtk.errors import Error
from irtk.hal import BindingRef
from schemas import cpu_executable as fb
from tests.hal.helpers import floats, run, upload

N = 1000
_ADD = f"""func.func @main(%a: tensor<{N}xf32>, %b: tensor<{N}xf32>) -> tensor<{N}xf32> {{
  %e = tensor.empty() : tensor<{N}xf32>
  %r = linalg.add ins(%a, %b : tensor<{N}xf32>, tensor<{N}xf32>) outs(%e : tensor<{N}xf32>)
    -> tensor<{N}xf32>
  return %r : tensor<{N}xf32>
}}"""


@functools.lru_cache(maxsize=1)
def compiled_add() -> bytes:
    import irtk
    from irtk.vm.loader import load_module

    module = load_module(irtk.compile_str(_ADD, target="cpu"))
    return bytes(next(s.data for s in module.rodata if s.name.startswith("executable_")))


def _launch(kernel: fb.KernelDefT) -> tuple[int, int, int]:
    """The workgroup count the host program computes from the compiled grid."""
    axes = []
    for axis in (kernel.grid.x, kernel.grid.y, kernel.grid.z):
        dims = list(axis.dims) if axis is not None and axis.dims is not None else []
        n = math.prod(int(kernel.loopRanges[d]) for d in dims)
        axes.append(-(-n // int(axis.divisor)) if dims else 1)
    return axes[0], axes[1], axes[2]


def _mutate(root: fb.ExecutableDefT, rng: random.Random) -> str:
    k = root.kernels[0]
    choice = rng.randrange(3)
    if choice == 0:
        k.tileSize = rng.choice([1, 2, 3, int(k.tileSize) // 2, int(k.tileSize) - 1,
                                 int(k.tileSize) * 2, rng.randrange(1, 5000)])
        return f"tile_size = {k.tileSize}"
    if choice == 1:
        k.grid.x.divisor = rng.choice([1, 2, int(k.grid.x.divisor) * 2,
                                       int(k.grid.x.divisor) + 1, rng.randrange(1, 10000)])
        return f"grid.x.divisor = {k.grid.x.divisor}"
    k.grid.x.dims = rng.choice([[], [0, 0]])
    return f"grid.x.dims = {k.grid.x.dims}"


@pytest.fixture(scope="module")
def sync_device():
    dev = create_sync_driver().create_device()
    yield dev
    dev.release()


def test_a_changed_launch_is_refused_or_computes_every_point(sync_device):
    rng = random.Random(17)
    data_rng = np.random.default_rng(17)
    original = compiled_add()
    workgroups = _launch(fb.ExecutableDefT.InitFromPackedBuf(original, 0).kernels[0])
    outcomes = {"refused": 0, "ran": 0}
    for _ in range(60):
        root = fb.ExecutableDefT.InitFromPackedBuf(original, 0)
        what = _mutate(root, rng)
        builder = flatbuffers.Builder(1024)
        builder.Finish(root.Pack(builder), file_identifier=b"IRCP")
        try:
            exe = sync_device.create_executable("cpu-kernel-fb", bytes(builder.Output()))
        except Error:
            outcomes["refused"] += 1
            continue
        a = data_rng.standard_normal(N).astype(np.float32)
        b = data_rng.standard_normal(N).astype(np.float32)
        out = upload(sync_device, np.full(N, np.nan, np.float32))
        cb = sync_device.create_command_buffer()
        cb.dispatch(exe, 0, workgroups, [], [BindingRef(upload(sync_device, a), 0, -1),
                                             BindingRef(upload(sync_device, b), 0, -1),
                                             BindingRef(out, 0, -1)])
        cb.finalize()
        run(sync_device, [cb])
        np.testing.assert_array_equal(floats(out), a + b, err_msg=what)
        outcomes["ran"] += 1
    assert outcomes["refused"] and outcomes["ran"], outcomes
