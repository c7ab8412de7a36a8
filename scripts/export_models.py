"""Export the small PyTorch models of tests/importers/torch_models.py with torch-mlir's FX
importer (irtk.importers.export) into tests/importers/fixtures: NAME.mlir as exported, unchanged,
and NAME.npz with the example input `x` and torch's outputs `y0`, `y1`, ... The tests compile these where
torch cannot be installed.

    .venv/bin/python scripts/export_models.py     # needs torch (scripts/setup.sh installs it)
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from irtk.importers import export  # noqa: E402
from tests.importers.torch_models import SMALL, make  # noqa: E402

FIXTURES = ROOT / "tests" / "importers" / "fixtures"


def main() -> None:
    import torch
    FIXTURES.mkdir(exist_ok=True)
    for name in SMALL:
        model, x = make(name)
        with torch.no_grad():
            y = model(x)
        results = y if isinstance(y, tuple) else (y,)
        export(model, x).save_mlir(FIXTURES / f"{name}.mlir")
        np.savez(FIXTURES / f"{name}.npz", x=x.numpy(),
                 **{f"y{i}": r.numpy() for i, r in enumerate(results)})
        print(f"{name}: {(FIXTURES / f'{name}.mlir').stat().st_size} bytes of MLIR")


if __name__ == "__main__":
    main()
