#!/usr/bin/env bash
# Creates (once) and prints the path of Cuvil's Python environment: a virtual environment holding exactly
# requirements/dev.lock (torch, torchvision, onnx, onnxruntime, openvino, transformers, timm, test tools).
# It lives outside the checkout, keyed by the lock file's hash, so a fresh clone (CI) finds it again instead of
# reinstalling gigabytes of torch; a changed lock makes a new one. A half-made environment (an interrupted
# install) has no .complete marker and is made again.
# Environment: CUVIL_VENV (use this path instead), CUVIL_PYTHON (the interpreter to make it from; Python 3.11).
set -euo pipefail
cd "$(dirname "$0")/.."
LOCK=requirements/dev.lock
hash=$(sha256sum "$LOCK" | cut -c1-16)
VENV=${CUVIL_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/cuvil/venv-$hash}
if [[ ! -f $VENV/.complete ]]; then
  PY=${CUVIL_PYTHON:-python3.11}
  command -v "$PY" >/dev/null || { echo "error: $PY not found (set CUVIL_PYTHON to a Python 3.11)" >&2; exit 1; }
  rm -rf "$VENV"
  echo "creating the Python environment $VENV from $LOCK (once per lock file)" >&2
  "$PY" -m venv "$VENV"
  # --no-deps: the lock is the whole closure, so nothing unpinned slips in (a bare torch would be a CUDA download).
  "$VENV/bin/pip" install --quiet --no-deps --no-input -r "$LOCK" >&2
  "$VENV/bin/pip" check >&2
  touch "$VENV/.complete"
fi
echo "$VENV"
