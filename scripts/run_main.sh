#!/usr/bin/env bash
# Sets everything up on a fresh Debian 12 machine, builds Cuvil and runs the main job (ResNet-18 through Cuvil vs
# PyTorch). Usage: scripts/run_main.sh [resnet18|mobilenet_v2|resnet50]
set -euo pipefail
cd "$(dirname "$0")/.."
# OpenMP workers sleep between parallel regions rather than spin (2-core machines, other work alongside).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
scripts/setup.sh
exec /usr/bin/python3 scripts/main_job.py "$@"
