#!/usr/bin/env bash
# Builds build/ while holding a lock, so several people (or agents) sharing this checkout never run two heavy
# builds at once on a 2-core machine. Extra arguments are ninja targets.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_BASEDIR=$PWD
exec flock /tmp/cuvil-build.lock bash -c 'if [[ $# -gt 0 ]]; then ninja -C build "$@"; else scripts/build.sh; fi' _ "$@"
