#!/usr/bin/env bash
# Configures and builds AON in ./build (Ninja, Release): bin/ holds aon-run,
# aon-merge, aon-inspect and the examples, lib/ holds libaon_agent.so.
#   bash scripts/build.sh            with the GoogleTest suites
#   bash scripts/build.sh --no-tests without them (faster; used by demo.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tests=ON
[[ ${1:-} == --no-tests ]] && tests=OFF

# CUDA 13 lives in /usr/local/cuda; its nvcc builds the CUDA example.
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DAON_BUILD_TESTS="$tests"
cmake --build build -j "$jobs"
