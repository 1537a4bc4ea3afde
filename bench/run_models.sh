#!/usr/bin/env bash
# Side-by-side benchmark of Cuvil against ONNX Runtime (C API) and PyTorch eager on the standard models, batch 1.
# Not part of the test suite; nothing asserts on time.
#
#   bench/run_models.sh [--iters-big N] [--iters-bert N] [--iters-small N]
#
# 1. exports ResNet-50, ResNet-18, MobileNetV2, a BERT-base-like encoder and the MLP 784-128-10 into out/bench/
#    (bench/bench_models.py, Debian's /usr/bin/python3; existing files are kept: delete out/bench to re-export);
# 2. installs ONNX Runtime (scripts/install_ort.sh) and builds build/bin/cuvil_bench_models;
# 3. runs the harness (ORT and Cuvil alternated) and PyTorch eager, and prints one table.
set -euo pipefail
cd "$(dirname "$0")/.."
# OpenMP workers spin only briefly (10k spins) before sleeping: as fast as spinning on an idle machine, and no
# collapse when other work shares the cores (libgomp's default of 300k spins made runs 8x slower then).
[[ -n "${OMP_WAIT_POLICY:-}" ]] || export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-10000}
ITERS_BIG=20 ITERS_BERT=10 ITERS_SMALL=500
while [[ $# -gt 0 ]]; do
  case $1 in
    --iters-big) ITERS_BIG=$2; shift 2 ;;
    --iters-bert) ITERS_BERT=$2; shift 2 ;;
    --iters-small) ITERS_SMALL=$2; shift 2 ;;
    *) echo "usage: $0 [--iters-big N] [--iters-bert N] [--iters-small N]" >&2; exit 2 ;;
  esac
done
PY=/usr/bin/python3
OUT=out/bench
mkdir -p "$OUT"

echo "== exporting models into $OUT" >&2
$PY bench/bench_models.py export "$OUT" >&2

echo "== installing ONNX Runtime" >&2
ORT_LIB=$(scripts/install_ort.sh)
echo "$ORT_LIB" >&2

echo "== building cuvil_bench_models" >&2
if [[ -f build/build.ninja ]]; then scripts/dev_build.sh cuvil_bench_models >&2; else scripts/dev_build.sh >&2; fi

BIN=build/bin/cuvil_bench_models
RESULTS=$OUT/results.jsonl
: > "$RESULTS"
status=0
run() {  # ITERS WARMUP MODEL...
  local iters=$1 warmup=$2; shift 2
  echo "== harness: $* (iters $iters, warm-up $warmup)" >&2
  "$BIN" --ort "$ORT_LIB" --json --iters "$iters" --warmup "$warmup" "$@" | tee -a "$RESULTS" >&2 || status=1
}
run "$ITERS_BIG" 1 "$OUT/resnet50.onnx" "$OUT/resnet18.onnx" "$OUT/mobilenet_v2.onnx"
run "$ITERS_BERT" 1 "$OUT/bert_base.onnx"
run "$ITERS_SMALL" 20 "$OUT/mlp.onnx"

echo "== PyTorch eager timings" >&2
$PY bench/bench_models.py table "$RESULTS" --iters-big "$ITERS_BIG" --iters-small "$ITERS_SMALL"
exit $status
