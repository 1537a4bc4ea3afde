#!/usr/bin/env bash
# Configures (once) and builds Cuvil into build/ (or $CUVIL_BUILD_DIR) with Ninja. CUVIL_PYTHON_EXE names the
# interpreter the extension is built for (setup.sh passes the project's environment); a change reconfigures.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${CUVIL_BUILD_DIR:-build}
PY_ARG=()
[[ -n "${CUVIL_PYTHON_EXE:-}" ]] && PY_ARG=("-DPython_EXECUTABLE=$CUVIL_PYTHON_EXE")
if [[ ! -f "$BUILD_DIR/build.ninja" ]] ||
   { [[ -n "${CUVIL_PYTHON_EXE:-}" ]] &&
     ! grep -qx "Python_EXECUTABLE:FILEPATH=$CUVIL_PYTHON_EXE" "$BUILD_DIR/CMakeCache.txt"; }; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${CUVIL_BUILD_TYPE:-Release} "${PY_ARG[@]}" \
    ${CUVIL_CMAKE_ARGS:-}
fi
cmake --build "$BUILD_DIR" -j "${CUVIL_JOBS:-$(nproc)}"
