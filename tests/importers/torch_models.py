"""The PyTorch models of the import tests (needs torch): small ones, exported into fixtures by
scripts/export_models.py, and ResNet-18 and MobileNet-V2 written out here (torchvision's
layouts; torchvision itself is not needed)."""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2 = nn.Linear(64, 32), nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l2(torch.relu(self.l1(x)))


class LeNet(nn.Module):
    """LeNet-5 on 16x16 inputs, with BatchNorm after the first convolution."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.bn = nn.Conv2d(1, 6, 5, padding=2), nn.BatchNorm2d(6)
        self.c2 = nn.Conv2d(6, 16, 5)
        self.f1, self.f2 = nn.Linear(16 * 2 * 2, 32), nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.max_pool2d(torch.relu(self.bn(self.c1(x))), 2)
        x = torch.max_pool2d(torch.relu(self.c2(x)), 2)
        return self.f2(torch.relu(self.f1(x.flatten(1))))


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 convolutions with BatchNorm, and the shortcut (a strided
    1x1 convolution with BatchNorm when the shape changes)."""

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNet18(nn.Module):
    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1,
             act: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups,
                                         bias=False), nn.BatchNorm2d(cout)]
    if act:
        layers.append(nn.ReLU6())
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    """MobileNet-V2's block: 1x1 expansion, 3x3 depthwise, 1x1 linear projection."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers = [] if expand == 1 else [_conv_bn(cin, hidden, 1)]
        layers += [_conv_bn(hidden, hidden, 3, stride, groups=hidden),
                   _conv_bn(hidden, cout, 1, act=False)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) if self.residual else self.body(x)


class MobileNetV2(nn.Module):
    def __init__(self, classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = [_conv_bn(3, 32, 3, 2)]
        cin = 32
        for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                           (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
            for i in range(n):
                layers.append(InvertedResidual(cin, c, s if i == 0 else 1, t))
                cin = c
        layers.append(_conv_bn(cin, 1280, 1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(torch.flatten(x, 1))


class DepthwiseBlock(nn.Module):
    """Depthwise, pointwise and grouped convolutions with BatchNorm and ReLU6."""

    def __init__(self, c: int = 8) -> None:
        super().__init__()
        self.dw = nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False)
        self.bn = nn.BatchNorm2d(c)
        self.pw = nn.Conv2d(c, 2 * c, 1)
        self.g = nn.Conv2d(2 * c, 2 * c, 3, padding=1, groups=4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.g(nn.functional.relu6(self.pw(torch.relu(self.bn(self.dw(x))))))


class Head(nn.Module):
    """A classifier head: Linear, GELU (`math.erf`), a cube (`math.fpowi` with an i64
    exponent, as in GELU's tanh form) and argmax (an i64 index result). Not GELU's tanh form
    itself: torch-mlir 20261001 writes its sqrt(2/pi) as 0.797724 (not 0.7978846), so its
    export differs from torch by about 5e-5."""

    def __init__(self) -> None:
        super().__init__()
        self.fc, self.gelu = nn.Linear(16, 8), nn.GELU()

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.fc(x)
        y = self.gelu(h) + 0.1 * h ** 3
        return y, torch.argmax(y, dim=1)


class Pools(nn.Module):
    """Average pooling, nearest upsampling, concatenation and adaptive max pooling."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        up = nn.functional.interpolate(nn.functional.avg_pool2d(x, 2), scale_factor=2,
                                       mode="nearest")
        return torch.cat([up, x], dim=1), nn.functional.adaptive_max_pool2d(x, 1)


class TokenEncoder(nn.Module):
    """Embedding (i64 token ids in; torch-mlir asserts each is in range), LayerNorm, mean."""

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.norm = nn.Embedding(VOCAB, 16), nn.LayerNorm(16)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.norm(self.embed(tokens)).mean(dim=1)


VOCAB = 20


def _randomize_batchnorm(model: nn.Module, g: torch.Generator) -> nn.Module:
    """Running statistics as a trained model has them (fresh ones are 0 and 1)."""
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.rand(m.num_features, generator=g) - 0.5)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
    return model.eval()


# name -> (the model, its example input's shape); small ones first (those get fixtures).
MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "mlp": (MLP, (2, 64)),
    "lenet": (LeNet, (1, 1, 16, 16)),
    "encoder": (lambda: nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True),
                (1, 8, 32)),
    "basic_block": (lambda: BasicBlock(8, 16, 2), (1, 8, 8, 8)),
    "depthwise": (DepthwiseBlock, (1, 8, 8, 8)),
    "head": (Head, (3, 16)),
    "pools": (Pools, (1, 3, 8, 8)),
    "tokens": (TokenEncoder, (2, 6)),
    "resnet18": (ResNet18, (1, 3, 64, 64)),
    "mobilenet_v2": (MobileNetV2, (1, 3, 64, 64)),
}
SMALL = ("mlp", "lenet", "encoder", "basic_block", "depthwise", "head", "pools", "tokens")


def make(name: str, seed: int = 0) -> tuple[nn.Module, torch.Tensor]:
    """Model `name` in eval mode with seeded weights and BatchNorm statistics, and an input."""
    g = torch.Generator().manual_seed(seed)
    factory, shape = MODELS[name]
    with torch.no_grad():
        torch.manual_seed(seed)
        model = _randomize_batchnorm(factory(), g)
        if name == "tokens":
            return model, torch.randint(0, VOCAB, shape, generator=g)
        return model, torch.randn(shape, generator=g)
