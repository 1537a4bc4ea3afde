#!/usr/bin/env bash
# Generates the ONNX backend node test suite (922 cases for onnx 1.12) with python3-onnx's own generator into
# $1 (default build/onnx-node-tests). onnx 1.12's generators still use NumPy aliases removed in NumPy 1.24, so
# they are restored first.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/onnx-node-tests}
if [[ -d "$OUT/node" && $(ls "$OUT/node" | wc -l) -ge 900 ]]; then exit 0; fi
rm -rf "$OUT"
/usr/bin/python3 - "$OUT" <<'PY'
import sys
import numpy as np
np.float, np.int, np.bool, np.object = float, int, bool, object
from onnx.backend.test.cmd_tools import main
sys.argv = ["onnx-backend-test", "generate-data", "-o", sys.argv[1]]
main()
PY
echo "generated $(ls "$OUT/node" | wc -l) node test cases in $OUT/node"
