"""An imported model: the linalg-on-tensors MLIR an importer wrote, ready to compile."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from irtk.compiler import driver


@dataclass(frozen=True)
class ImportedModel:
    """`mlir` is the program as text (weights included); `name` names it in error messages
    (`model.onnx`, or the `nn.Module`'s class)."""
    mlir: str
    name: str

    def save_mlir(self, path: str | Path) -> None:
        """Write the MLIR, to compile later with `irtk compile` or read."""
        Path(path).write_text(self.mlir)

    def compile(self, target: str = "vulkan-spirv,cpu",
                **options: Any) -> bytes:
        """Module bytes (.vmfb), as `irtk.compile_str` makes them; by default for Vulkan and the
        CPU, so that every device can run the module."""
        stem = Path(self.name).stem
        options.setdefault("module_name", stem if stem.isidentifier() else "model")
        return driver.compile_str(self.mlir, target=target, filename=f"<{self.name}>",
                                  **options)

    def load(self, device: str | None = None, target: str = "vulkan-spirv,cpu",
             **options: Any) -> Any:
        """Compile and load on `device` (as `irtk.load`): the exports are callables on numpy
        arrays."""
        from irtk.runtime import load
        return load(self.compile(target, **options), device=device)
