#!/usr/bin/env bash
# Installs the Debian 12 packages cnnrt needs, skipping those already present (idempotent).
#
#   scripts/install-deps.sh            build + test dependencies (what the README's commands need)
#   scripts/install-deps.sh --dev      also the Python tools that regenerate models and plots
#   scripts/install-deps.sh --fuzz     also clang's libFuzzer runtime (for the fuzz target)
#
# The CUDA Toolkit (nvcc, cuDNN) is not a Debian package: it is expected in /usr/local/cuda.
set -euo pipefail

packages=(
  cmake ninja-build g++ pkg-config python3
  libprotobuf-dev protobuf-compiler libonnx-dev
  libspdlog-dev libfmt-dev doctest-dev libstb-dev libcli11-dev nlohmann-json3-dev zlib1g-dev
  libcpp-httplib-dev
  libonnx-testdata dataset-fashion-mnist
  python3-dev pybind11-dev python3-pybind11 python3-numpy python3-pytest
)
for arg in "$@"; do
  case "$arg" in
    --dev)  packages+=(python3-torch python3-onnx python3-matplotlib python3-skimage) ;;
    --fuzz) packages+=(clang libclang-rt-14-dev) ;;
    *) echo "install-deps.sh: unknown option '$arg' (use --dev or --fuzz)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
