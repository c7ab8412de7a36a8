#!/usr/bin/env bash
# Set up (idempotently), add PyTorch for its import tests, type-check the packages with mypy
# (configured in pyproject.toml), then run the whole test suite on every driver found
# (local-sync, local-task, SwiftShader, lavapipe), with the Vulkan validation layer on. A type
# error fails the run before any test. Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
# PyTorch, for the PyTorch import tests and example (setup.sh leaves it out: the demo and irtk
# itself do not need it), as its CPU build: PyPI's default build pulls CUDA packages.
if ! "$ROOT/.venv/bin/python" -c "import torch" 2>/dev/null; then
  echo "[test] installing torch (CPU build) into .venv" >&2
  "$ROOT/.venv/bin/python" -m pip install -q "torch==2.13.0+cpu"
fi
# The type checker first; pyproject.toml's [tool.mypy] says what it checks.
"$ROOT/.venv/bin/mypy"
# Every Vulkan validation message fails the test that caused it.
export IRTK_VULKAN_VALIDATION="${IRTK_VULKAN_VALIDATION:-1}"
# SwiftShader and lavapipe must be there: their tests may not silently skip.
export IRTK_REQUIRE_VULKAN="${IRTK_REQUIRE_VULKAN:-1}"
exec "$ROOT/.venv/bin/python" -m pytest -q "$@"
