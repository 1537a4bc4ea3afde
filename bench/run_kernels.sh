#!/usr/bin/env bash
# Generated kernels against memory bandwidth and ONNX Runtime: single-op models (Add, a bias-scale-ReLU chain,
# GELU, Softmax, LayerNormalization, Sin; Softmax and an op-by-op LayerNorm over the channels of NCHW; Transposes
# alone and feeding an Add; CumSum along rows and down the middle axis) at 64 MB per tensor, AlexNet's LRN, TopK
# over rows and over one row of logits, SoftmaxCrossEntropyLoss over logits and a segmentation map, and BERT-base
# sizes; ORT and Cuvil alternated, 2 threads.
# Prints the copy bandwidth measured in the same run, each runtime's GB/s and Cuvil's share of the copy bandwidth.
# Not part of the test suite; nothing asserts on time.
#
#   bench/run_kernels.sh [--iters N]
set -euo pipefail
cd "$(dirname "$0")/.."
[[ -n "${OMP_WAIT_POLICY:-}" ]] || export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-10000}
ITERS=20
[[ "${1:-}" == "--iters" ]] && ITERS=$2
OUT=out/bench/kernels
mapfile -t MODELS < <(/usr/bin/python3 bench/kernel_models.py "$OUT")
ORT_LIB=$(scripts/install_ort.sh)
if [[ -f build/build.ninja ]]; then scripts/dev_build.sh cuvil_bench_models >&2; else scripts/dev_build.sh >&2; fi
build/bin/cuvil_bench_models --ort "$ORT_LIB" --gbps --iters "$ITERS" --warmup 2 --threads 2 "${MODELS[@]}"
