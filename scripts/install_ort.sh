#!/usr/bin/env bash
# Prints the path of ONNX Runtime's C library for the side-by-side benchmarks (bench/run_models.sh and friends
# dlopen it): the libonnxruntime.so.1.* that PyPI's onnxruntime wheel carries in onnxruntime/capi/, taken from
# the project's Python environment (scripts/python_env.sh; onnxruntime's version is pinned in
# requirements/dev.lock).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(scripts/python_env.sh)
LIB=$(ls "$VENV"/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so.1* 2>/dev/null | head -n 1)
[[ -n $LIB && -f $LIB ]] || { echo "error: libonnxruntime.so.1* not found in $VENV's onnxruntime" >&2; exit 1; }
echo "$LIB"
