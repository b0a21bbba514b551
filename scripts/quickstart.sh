#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, and classifies a shipped sample image
# with the shipped model (on the GPU when there is one, else on the CPU with one warning line).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
scripts/install-deps.sh
build=$(scripts/build.sh --target cnnrt)
"$build/bin/cnnrt" infer models/fashion_lenet.onnx "${@:-samples/fashion_0_ankle_boot.png}"
