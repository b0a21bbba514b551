#!/usr/bin/env bash
# One round on the GPU machine (see ../shared/device/README.md): GPU tests, GPU conformance, benchmarks.
# Build here first (cmake --preset release), then bundle:
#   scripts/bundle_device.sh          # programs + libraries + conformance data into .device/
# and run, on the GPU machine, from the repo root:
#   scripts/gpu_round.sh [tests] [sanitize] [bench] [model MODEL...]
# Full logs and JSON go to $OUT (default /tmp/cnnrt-round); a short summary is printed last.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
[ -d .device ] || tar -xJf .device.tar.xz
source .device/env.sh
OUT=${OUT:-/tmp/cnnrt-round}
mkdir -p "$OUT"
export CNNRT_ONNX_TESTDATA="$here/.device/testdata"
export CNNRT_FASHION_MNIST="$here/.device/data/fashion-mnist"
export CNNRT_CACHE_DIR="$OUT/cache"
summary="$OUT/summary.txt"
: > "$summary"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv \
  | tee "$OUT/gpu.txt" >> "$summary"

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests bench)
for step in "${steps[@]}"; do
  case "$step" in
    tests)
      CNNRT_CONFORMANCE_REPORT="$OUT/conformance_gpu.tsv" gpu_tests > "$OUT/gpu_tests.log" 2>&1
      echo "gpu_tests exit $?: $(grep -E '^\[doctest\] (test cases|assertions)' "$OUT/gpu_tests.log" | tr '\n' ' ')" >> "$summary"
      grep -E "conformance \(gpu\)|variant checks in all" "$OUT/gpu_tests.log" >> "$summary"
      grep -B2 -A6 "ERROR" "$OUT/gpu_tests.log" | head -60 >> "$summary"
      ;;
    sanitize)
      for tool in memcheck racecheck synccheck; do
        compute-sanitizer --tool "$tool" --error-exitcode 99 gpu_tests -tce="*conformance*" > "$OUT/sanitize_$tool.log" 2>&1
        echo "compute-sanitizer $tool: exit $? ($(grep -c 'ERROR SUMMARY' "$OUT/sanitize_$tool.log") summaries; $(grep -E 'ERROR SUMMARY' "$OUT/sanitize_$tool.log" | sort | uniq -c | tr '\n' ' '))" >> "$summary"
      done
      ;;
    bench)
      for suite in special general small; do
        cnnrt bench --suite "$suite" --json "$OUT/bench_$suite.json" > "$OUT/bench_$suite.txt" 2> "$OUT/bench_$suite.err"
        echo "bench $suite exit $?: $(tail -1 "$OUT/bench_$suite.txt")" >> "$summary"
      done
      ;;
    model)
      ;;
    *.onnx)
      name=$(basename "$step" .onnx)
      for batch in 1 4096; do
        cnnrt bench "$step" --batch "$batch" --json "$OUT/model_${name}_b$batch.json" > "$OUT/model_${name}_b$batch.txt" 2>&1
        echo "model $name batch $batch exit $?: $(grep -E '^(latency|throughput)' "$OUT/model_${name}_b$batch.txt" | tr '\n' ' ')" >> "$summary"
      done
      ;;
  esac
done
cat "$summary"
