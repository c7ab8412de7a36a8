"""Time one IREE function call, for bench/ scripts; run with the Python of an environment that has
iree-base-compiler and iree-base-runtime (never irtk's own). Prints one JSON line.

IREE compiles for its best target on each device: `--iree-vulkan-target=llvmpipe` on lavapipe
(subgroup size 8 and its features); its default Vulkan target elsewhere (an llvmpipe module
gives wrong answers on SwiftShader, whose subgroup size is 4).

    python iree_runner.py --mlir prog.mlir --backend vulkan-spirv --device llvmpipe \
        --shapes 1024x1024xf32,1024xf32 --reps 20
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import iree.runtime as ireert

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import median_time  # noqa: E402  (standard library only: runs in IREE's env)


class _AlignedNumpy:
    """numpy, but `empty` returns page-aligned arrays: IREE 3.13's Python readback imports the
    result array into Vulkan, which needs minImportedHostPointerAlignment (4096)."""

    def __getattr__(self, name: str):
        return getattr(np, name)

    @staticmethod
    def empty(shape, dtype=float):
        dtype = np.dtype(dtype)
        count = int(np.prod(shape))
        raw = np.empty(count * dtype.itemsize + 4096, np.uint8)
        start = (-raw.ctypes.data) % 4096
        return raw[start:start + count * dtype.itemsize].view(dtype).reshape(shape)


def make_device(kind: str):
    if kind in ("local-sync", "local-task"):
        return ireert.get_device(f"{kind}://")
    driver = ireert.get_driver("vulkan")
    for info in driver.query_available_devices():
        if kind.lower() in str(info.get("name", "")).lower():
            return driver.create_device(info)
    raise SystemExit(f"no IREE Vulkan device matching '{kind}'")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mlir", required=True)
    p.add_argument("--backend", required=True)
    p.add_argument("--device", required=True)
    p.add_argument("--shapes", required=True)
    p.add_argument("--reps", type=int, default=10)
    a = p.parse_args()
    from iree.runtime import array_interop
    array_interop.np = _AlignedNumpy()
    compiler = Path(sys.executable).parent / "iree-compile"
    with tempfile.TemporaryDirectory() as tmp:
        vmfb = Path(tmp) / "m.vmfb"
        flags = [f"--iree-hal-target-backends={a.backend}"]
        if a.backend == "llvm-cpu":
            flags.append("--iree-llvmcpu-target-cpu=host")
        elif a.device == "llvmpipe":
            flags.append("--iree-vulkan-target=llvmpipe")
        subprocess.run([str(compiler), a.mlir, *flags, "-o", str(vmfb)], check=True)
        device = make_device(a.device)
        config = ireert.Config(device=device)
        ctx = ireert.SystemContext(config=config)
        ctx.add_vm_module(ireert.VmModule.copy_buffer(ctx.instance, vmfb.read_bytes()))
        fn = ctx.modules.module["main"]
        rng = np.random.default_rng(0)
        args = []
        for spec in a.shapes.split(","):
            *dims, et = spec.split("x")
            args.append(rng.standard_normal([int(d) for d in dims]).astype(np.float32))
        resident = [ireert.asdevicearray(device, x) for x in args]
        figures: dict[str, float | None] = {}
        # "seconds": numpy arguments in, results read back (uploads included); "resident":
        # arguments already on the device, as iree-benchmark-module times a call. IREE 3.13
        # cannot read back a Vulkan result whose size is not a multiple of 4096 bytes (it
        # imports the host array); those two figures are then null.
        for key, call_args in (("seconds", args), ("resident", resident)):
            try:
                figures[key] = median_time(lambda: np.asarray(fn(*call_args)), a.reps)
            except ValueError as e:
                if "minImportedHostPointerAlignment" not in str(e):
                    raise
                figures[key] = None
        # "kept": resident, and the results left on the device too (iree-benchmark-module
        # never reads them back).
        figures["kept"] = median_time(lambda: fn(*resident), a.reps)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
