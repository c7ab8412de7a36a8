#!/usr/bin/env bash
# Set up (idempotently), type-check the packages with mypy (configured in pyproject.toml), then
# run the whole test suite on every driver found (local-sync, local-task, SwiftShader, lavapipe),
# with the Vulkan validation layer on. A type error fails the run before any test. Extra
# arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
# The type checker first; pyproject.toml's [tool.mypy] says what it checks.
"$ROOT/.venv/bin/mypy"
# Every Vulkan validation message fails the test that caused it.
export IRTK_VULKAN_VALIDATION="${IRTK_VULKAN_VALIDATION:-1}"
# SwiftShader and lavapipe must be there: their tests may not silently skip.
export IRTK_REQUIRE_VULKAN="${IRTK_REQUIRE_VULKAN:-1}"
exec "$ROOT/.venv/bin/python" -m pytest -q "$@"
