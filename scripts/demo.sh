#!/usr/bin/env bash
# Set up (idempotently), then compile the example for vulkan-spirv and run it on the default
# Vulkan device, printing the result.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/setup.sh"
export MESA_SHADER_CACHE_DIR="${MESA_SHADER_CACHE_DIR:-$ROOT/.cache/mesa}"
IRTK="$ROOT/.venv/bin/irtk"
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT
"$IRTK" devices
echo
echo "\$ irtk compile examples/elementwise.mlir --target=vulkan-spirv -o elementwise.vmfb"
"$IRTK" compile "$ROOT/examples/elementwise.mlir" --target=vulkan-spirv -o "$OUT/elementwise.vmfb"
echo "\$ irtk run elementwise.vmfb --device=vulkan --function=main --input=\"2x4xf32=1 -2 3 -4 0.5 0 -0.5 2\" --input=\"4xf32=0.5 -1 2 0\""
"$IRTK" run "$OUT/elementwise.vmfb" --device=vulkan --function=main \
  --input="2x4xf32=1 -2 3 -4 0.5 0 -0.5 2" --input="4xf32=0.5 -1 2 0"
