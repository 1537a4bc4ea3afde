#!/usr/bin/env bash
# Installs ONNX Runtime's CPU library (from the onnxruntime-node npm package) into third_party/ort, once, and
# prints the path of its libonnxruntime.so.1. Only the npm registry is reachable from these machines;
# --ignore-scripts skips the package's install script (it would try to download GPU providers).
# ORT_VERSION overrides the version (default 1.30.0).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=${ORT_VERSION:-1.30.0}
DEST=third_party/ort
PKG=$DEST/node_modules/onnxruntime-node
LIB=$PKG/bin/napi-v6/linux/x64/libonnxruntime.so.1

installed_version() {
  [[ -f $PKG/package.json ]] && node -e "console.log(require('./$PKG/package.json').version)" 2>/dev/null
}

if [[ ! -f $LIB || "$(installed_version || true)" != "$VERSION" ]]; then
  mkdir -p "$DEST"
  [[ -f $DEST/package.json ]] || echo '{"name": "cuvil-ort", "private": true}' > "$DEST/package.json"
  echo "installing onnxruntime-node@$VERSION into $DEST" >&2
  npm install --prefix "$DEST" --ignore-scripts --no-audit --no-fund --loglevel=error \
    "onnxruntime-node@$VERSION" >&2
fi
[[ -f $LIB ]] || { echo "error: $LIB not found after install" >&2; exit 1; }
echo "$PWD/$LIB"
