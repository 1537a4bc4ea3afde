#!/usr/bin/env bash
# Installs every Debian package Cuvil needs, creates its Python environment (scripts/python_env.sh: torch 2,
# ONNX Runtime, OpenVINO, ... pinned by requirements/dev.lock), then configures and builds it, the extension for
# that environment's interpreter. Idempotent: re-running only installs what is missing and rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  clang-14 libclang-rt-14-dev            # libFuzzer + sanitizers
  libomp-14-dev                           # OpenMP for the clang (sanitizer) build
  libgtest-dev libgmock-dev libbenchmark-dev
  libprotobuf-dev protobuf-compiler libonnx-dev
  pybind11-dev python3-dev                # the Python extension: pybind11 and Python.h
  libdnnl-dev ocl-icd-opencl-dev opencl-headers  # oneDNN 2.6 (OpenMP threads); its CMake config needs OpenCL
  libre2-dev                              # RegexFullMatch (RE2 patterns, as ONNX specifies)
  llvm-16-dev                             # LLVM 16 ORC JIT for generated kernels (src/codegen)
  python3 python3-numpy python3-onnx        # onnx 1.12's node-suite generator (scripts/gen_onnx_tests.sh)
  liblld-16-dev lld-16                    # generated kernels linked into the .cuv artifact (lld as a library)
  libcpp-httplib-dev libgrpc++-dev protobuf-compiler-grpc libsimdjson-dev nlohmann-json3-dev \
    prometheus-cpp-dev wrk                # cuvil serve (KServe v2 over REST and gRPC) and its load test
  chromium linux-perf                     # the HTML profile tested in a real browser; perf's view of kernels
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi

VENV=$(scripts/python_env.sh)
if [[ "${CUVIL_SKIP_BUILD:-0}" != "1" ]]; then
  CUVIL_PYTHON_EXE=$VENV/bin/python scripts/build.sh
fi
