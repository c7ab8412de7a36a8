"""A PyTorch model end to end: export it with torch-mlir (irtk.importers.export), compile it for
Vulkan and the CPU, run it on every device and compare with torch.

    pip install 'irtk[torch]'     # torch (its CPU build is enough) and torch-mlir
    python examples/pytorch_model.py
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

import irtk
from irtk.importers import export


class SmallNet(nn.Module):
    """Convolution, BatchNorm, pooling and a classifier: what a vision model is made of."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.ReLU6(),   # depthwise
            nn.Conv2d(16, 32, 1), nn.ReLU())
        self.classifier = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return torch.softmax(self.classifier(torch.flatten(x, 1)), dim=1)


def main() -> None:
    torch.manual_seed(0)
    model = SmallNet().eval()   # inference: BatchNorm uses its running statistics
    example = torch.randn(1, 3, 32, 32)
    imported = export(model, example)              # linalg-on-tensors MLIR, weights included
    module = imported.compile("vulkan-spirv,cpu")  # .vmfb bytes; imported.save_mlir(path) too
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        expected = model(x).numpy()
    print(f"{'device':<50} {'max |irtk - torch|':>20}")
    for device in irtk.devices():
        got = np.asarray(irtk.load(module, device=device.uri).main(x.numpy()))
        error = float(np.abs(got - expected).max())
        print(f"{device.uri + ' (' + device.name + ')':<50} {error:>20.2e}")
        assert error < 1e-4, f"{device.uri} differs from torch by {error}"


if __name__ == "__main__":
    main()
