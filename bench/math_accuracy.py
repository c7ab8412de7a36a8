"""Print the measured math accuracy table of docs/codegen_spirv.md ("Math accuracy").

For every math op and device, the largest error in ULP over all input ranges (tiny,
subnormal, normal, huge, special; tests/e2e/math_accuracy.py) for f32 / f16 / bf16 / f64, "-"
where the device does not have the op on that type. Vulkan devices run the default profile's
code and their own (the larger error counts). Run: .venv/bin/python bench/math_accuracy.py
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import irtk  # noqa: E402
from tests.conftest import all_device_uris, device_info, target_for  # noqa: E402
from tests.e2e.math_accuracy import (DOMAINS, FLOAT_TYPES, OPS, RANGES,  # noqa: E402
                                     measure)


def _label(uri: str) -> str:
    name = device_info(uri).name
    return "SwiftShader" if "SwiftShader" in name else "lavapipe" if "llvmpipe" in name else uri


def _profiles(uri: str) -> list[str]:
    if target_for(uri) != "vulkan-spirv":
        return ["default"]
    name = device_info(uri).name.lower()
    return ["default"] + [p for p in ("llvmpipe", "swiftshader") if p in name]


def cell(key: str, kind: str, uri: str, cache: dict) -> str:
    worst: float | None = None
    for profile in _profiles(uri):
        try:
            errors = measure(OPS[key], kind, uri, seed=2026, compiled=cache,
                             target=target_for(uri), vulkan_target=profile)
        except irtk.Error:
            continue
        value = max(errors[r] for r in RANGES)
        worst = value if worst is None else max(worst, value)
    return "-" if worst is None else f"{worst:.2g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--devices", nargs="*", default=None,
                        help="device URIs (default: local-task and every Vulkan device)")
    args = parser.parse_args()
    devices = args.devices or [u for u in all_device_uris() if u != "local-sync"]
    cache: dict = {}
    print(f"| op | normal inputs | {' | '.join(_label(u) for u in devices)} |")
    print(f"|---|---|{'---|' * len(devices)}")
    for key in OPS:
        cells = [" / ".join(cell(key, k, u, cache) for k in FLOAT_TYPES) for u in devices]
        print(f"| {key} | {DOMAINS[key]} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()
