#!/usr/bin/env bash
# Set up (idempotently), then run the whole test suite on every driver found (local-sync,
# local-task, SwiftShader, lavapipe). Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
cd "$ROOT"
exec "$ROOT/.venv/bin/python" -m pytest -q "$@"
