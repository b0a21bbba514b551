#!/usr/bin/env bash
# Configures and builds cnnrt: with CUDA (preset `release`, sm_90) when the CUDA Toolkit is installed,
# else the CPU-only preset `cpu`. Prints the build folder's name last (build/release or build/cpu).
#   scripts/build.sh [extra cmake --build arguments]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
preset=cpu
if [ -x "${CUDACXX:-/usr/local/cuda/bin/nvcc}" ]; then preset=release; fi
jobs=$(nproc 2>/dev/null || echo 2)
cmake --preset "$preset" > /dev/null
cmake --build --preset "$preset" -j "$jobs" "$@" >&2
echo "build/$preset"
