#!/usr/bin/env bash
# Set up everything irtk needs on Debian 12, idempotently: Debian packages (Vulkan loader,
# lavapipe, the validation layer), SwiftShader from Debian's chromium-common registered as a
# Vulkan driver, and a virtual environment at .venv with irtk and its dependencies.
# Installs only what is missing. Sourced by demo.sh and test.sh; safe to run on its own.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

log() { echo "[setup] $*" >&2; }

# --- Debian packages ---------------------------------------------------------------------
PACKAGES=(libvulkan1 mesa-vulkan-drivers vulkan-validationlayers python3 python3-venv python3-pip)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- SwiftShader, registered with the Vulkan loader ----------------------------------------
SS_DIR=/usr/local/lib/irtk-swiftshader
SS_ICD=/etc/vulkan/icd.d/irtk_swiftshader_icd.json
if [ ! -f "$SS_DIR/libvk_swiftshader.so" ] || [ ! -f "$SS_ICD" ]; then
  log "installing SwiftShader from Debian's chromium-common"
  tmp="$(mktemp -d)"
  chmod 755 "$tmp"
  (cd "$tmp" && $SUDO apt-get download chromium-common >/dev/null 2>&1 \
     || { $SUDO apt-get update -qq && $SUDO apt-get download chromium-common >/dev/null; })
  dpkg -x "$tmp"/chromium-common_*.deb "$tmp/x"
  $SUDO mkdir -p "$SS_DIR" /etc/vulkan/icd.d
  $SUDO cp "$tmp/x/usr/lib/chromium/libvk_swiftshader.so" "$tmp/x/usr/lib/chromium/vk_swiftshader_icd.json" "$SS_DIR/"
  # The loader resolves a relative library_path against the json's own folder; register an
  # absolute one so the driver is found from the system ICD folder.
  sed "s#\"./libvk_swiftshader.so\"#\"$SS_DIR/libvk_swiftshader.so\"#" \
    "$SS_DIR/vk_swiftshader_icd.json" | $SUDO tee "$SS_ICD" >/dev/null
  rm -rf "$tmp"
fi

# --- Python virtual environment ----------------------------------------------------------
VENV="$ROOT/.venv"
PY="${PYTHON:-python3}"
# A venv left half-made by an interrupted run (no working pip) is made again from scratch.
if [ -d "$VENV" ] && ! "$VENV/bin/python" -m pip --version >/dev/null 2>&1; then
  log "removing the broken $VENV"
  rm -rf "$VENV"
fi
if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.irtk-installed"
want="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] || [ ! -x "$VENV/bin/irtk" ]; then
  log "installing irtk and its dependencies into .venv"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
  "$VENV/bin/python" -m pip install -q -e "$ROOT[dev,onnx]"
  echo "$want" > "$stamp"
fi
