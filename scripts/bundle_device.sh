#!/usr/bin/env bash
# Packs what a GPU round needs into .device/ (kept out of git): the release programs with the Debian
# libraries they link (../shared/device/bundle.sh), and the ONNX conformance cases the CPU backend passes
# (the GPU machine has no libonnx-testdata), packed as .device.tar.xz. Run after
# `cmake --build --preset release`.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bin=build/release/bin
"$here/../shared/device/bundle.sh" .device "$bin/cnnrt" "$bin/gpu_tests"
# Conformance data: every case the CPU suite passes, found by running it here.
report=$(mktemp)
CNNRT_CONFORMANCE_REPORT="$report" "$bin/unit_tests" -tc="ONNX conformance on the CPU backend" > /dev/null 2>&1 || true
mkdir -p .device/testdata
grep '^passed' "$report" | cut -f2 | while read -r case_name; do
  mkdir -p ".device/testdata/$(dirname "$case_name")"
  cp -r "/usr/share/libonnx-testdata/data/$case_name" ".device/testdata/$case_name"
done
rm -f "$report"
# Fashion-MNIST's test set, for the GPU-against-CPU prediction test (tests/gpu/test_runtime.cpp).
mkdir -p .device/data/fashion-mnist
cp /usr/share/datasets/fashion-mnist/t10k-*.gz .device/data/fashion-mnist/
# The device tool carries at most 64 MiB: ship it compressed; gpu_round.sh unpacks it there.
tar -cJf .device.tar.xz .device
du -sh .device .device.tar.xz
