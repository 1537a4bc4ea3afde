#!/usr/bin/env bash
# Configures (once) and builds Cuvil into build/ (or $CUVIL_BUILD_DIR) with Ninja.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${CUVIL_BUILD_DIR:-build}
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${CUVIL_BUILD_TYPE:-Release} ${CUVIL_CMAKE_ARGS:-}
fi
cmake --build "$BUILD_DIR" -j "${CUVIL_JOBS:-$(nproc)}"
