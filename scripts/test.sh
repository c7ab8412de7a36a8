#!/usr/bin/env bash
# Set up (idempotently), then run the whole test suite on every driver found (local-sync,
# local-task, SwiftShader, lavapipe), with the Vulkan validation layer on. Extra arguments go
# to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
# Every Vulkan validation message fails the test that caused it.
export IRTK_VULKAN_VALIDATION="${IRTK_VULKAN_VALIDATION:-1}"
# SwiftShader and lavapipe must be there: their tests may not silently skip.
export IRTK_REQUIRE_VULKAN="${IRTK_REQUIRE_VULKAN:-1}"
exec "$ROOT/.venv/bin/python" -m pytest -q "$@"
