#!/usr/bin/env bash
# Configures and builds cnnrt: with CUDA (preset `release`: every GPU from Turing on, docs/gpus.md) when
# the CUDA Toolkit's nvcc is found (CUDACXX, PATH, CUDA_PATH or /usr/local/cuda), else the CPU-only preset
# `cpu`. Prints the build folder's name last (build/release or build/cpu).
#   scripts/build.sh [extra cmake --build arguments]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
preset=cpu
for nvcc in "${CUDACXX:-}" "$(command -v nvcc || true)" "${CUDA_PATH:+$CUDA_PATH/bin/nvcc}" /usr/local/cuda/bin/nvcc; do
  if [ -n "$nvcc" ] && [ -x "$nvcc" ]; then preset=release; break; fi
done
jobs=$(nproc 2>/dev/null || echo 2)
cmake --preset "$preset" > /dev/null
cmake --build --preset "$preset" -j "$jobs" "$@" >&2
echo "build/$preset"
