#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine, builds Cuvil and runs the main job (ResNet-18 through Cuvil vs
# PyTorch). Usage: scripts/run_main.sh [resnet18|mobilenet_v2|resnet50]
set -euo pipefail
cd "$(dirname "$0")/.."
# OpenMP workers spin only briefly (10k spins) before sleeping: as fast as spinning on an idle machine, and no
# collapse when other work shares the cores (libgomp's default of 300k spins made runs 8x slower then).
[[ -n "${OMP_WAIT_POLICY:-}" ]] || export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-10000}
scripts/setup.sh
exec "$(scripts/python_env.sh)/bin/python" scripts/main_job.py "$@"
