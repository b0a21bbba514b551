#!/usr/bin/env bash
# One round on the GPU machine (see ../shared/device/README.md): GPU tests, GPU conformance, benchmarks.
# Build here first (cmake --preset release), then bundle:
#   scripts/bundle_device.sh          # programs + libraries + conformance data into .device/
# and run, on the GPU machine, from the repo root:
#   scripts/gpu_round.sh [tests] [sanitize] [bench | bench:SUITE,SUITE] [MODEL.onnx...]
# Full logs and JSON go to $OUT (default /tmp/cnnrt-round); a short summary is printed last.
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
[ -d .device ] || tar -xJf .device.tar.xz
export CNNRT_ONNX_TESTDATA="$repo/.device/testdata"
export CNNRT_FASHION_MNIST="$repo/.device/data/fashion-mnist"
source .device/env.sh  # sets its own variables (among them `here`): keep ours under other names
# The device tool brings back only a few files: everything goes into $OUT/round/, packed at the end.
FINAL_OUT=${OUT:-/tmp/cnnrt-round}
OUT="$FINAL_OUT/round"
mkdir -p "$OUT"
export CNNRT_CACHE_DIR="$OUT/cache"
summary="$OUT/summary.txt"
: > "$summary"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv \
  | tee "$OUT/gpu.txt" >> "$summary"

# Reruns a crashed command under the bundled gdb (the GPU machine has no debugger of its own) into LOG, and
# puts the backtrace into the summary: backtrace_of LOG PROGRAM ARGS...
backtrace_of() {
  local log=$1; shift
  command -v gdb > /dev/null || return 0
  PYTHONHOME="$repo/.device/py" gdb -data-directory "$repo/.device/gdb-data" -batch -ex run -ex bt \
    -ex "thread apply all bt 8" --args "$(command -v "$1")" "${@:2}" > "$log" 2>&1
  grep -A25 "received signal" "$log" | head -40 >> "$summary"
}

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests bench)
for step in "${steps[@]}"; do
  case "$step" in
    tests)
      # One process per test case: a crash loses only its own case, and is rerun under gdb for a
      # backtrace (the GPU machine has no debugger of its own: bundle_device.sh ships one).
      gpu_tests -ltc 2>/dev/null | sed -n '/^=*$/,/^=*$/p' | grep -v '^=*$' | grep -v '^\[doctest\]' > "$OUT/test_cases.txt"
      passed=0; failed=0; crashed=0
      : > "$OUT/gpu_tests.log"
      while IFS= read -r name; do
        [ -n "$name" ] || continue
        filter=${name//,/?}
        CNNRT_CONFORMANCE_REPORT="$OUT/conformance_gpu.tsv" stdbuf -oL -eL gpu_tests -tc="$filter" --duration=true >> "$OUT/gpu_tests.log" 2>&1
        rc=$?
        if [ $rc -eq 0 ]; then passed=$((passed + 1));
        elif [ $rc -ge 128 ]; then
          crashed=$((crashed + 1))
          echo "CRASH ($rc): $name" >> "$summary"
          backtrace_of "$OUT/gdb_$crashed.log" gpu_tests -tc="$filter"
        else
          failed=$((failed + 1))
          echo "FAILED: $name" >> "$summary"
        fi
      done < "$OUT/test_cases.txt"
      echo "gpu_tests: $passed passed, $failed failed, $crashed crashed (one process per case)" >> "$summary"
      grep -E "conformance \(gpu\)|variant checks in all" "$OUT/gpu_tests.log" >> "$summary"
      grep -B2 -A6 "ERROR" "$OUT/gpu_tests.log" | head -80 >> "$summary"
      ;;
    sanitize|sanitize:*)
      # compute-sanitizer over the kernel test cases (every convolution family, pooling, GEMM): the tools
      # slow kernels 10-100x, so the whole-model and conformance cases stay out. SANITIZE_TIMEOUT bounds
      # each tool (the device time of a round is limited).
      cases='conv2d_*,direct convolution*,*pool*,*gemm*,*GEMM*'
      [ "$step" = sanitize ] || cases=${step#sanitize:}
      for tool in memcheck racecheck synccheck; do
        timeout "${SANITIZE_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --error-exitcode 99 gpu_tests -tc="$cases" > "$OUT/sanitize_$tool.log" 2>&1
        echo "compute-sanitizer $tool: exit $? ($(grep -E 'ERROR SUMMARY' "$OUT/sanitize_$tool.log" | sort | uniq -c | tr '\n' ' '); $(grep -E '^\[doctest\] test cases' "$OUT/sanitize_$tool.log"))" >> "$summary"
      done
      ;;
    bench|bench:*)
      suites="special general small"
      [ "$step" = bench ] || suites=${step#bench:}
      for suite in ${suites//,/ }; do
        cnnrt bench --suite "$suite" --json "$OUT/bench_$suite.json" > "$OUT/bench_$suite.txt" 2> "$OUT/bench_$suite.err"
        echo "bench $suite exit $?: $(tail -1 "$OUT/bench_$suite.txt")" >> "$summary"
      done
      ;;
    *.onnx)
      name=$(basename "$step" .onnx)
      for batch in 1 4096; do
        stdbuf -oL -eL cnnrt bench "$step" --batch "$batch" --json "$OUT/model_${name}_b$batch.json" > "$OUT/model_${name}_b$batch.txt" 2>&1
        rc=$?
        echo "model $name batch $batch exit $rc: $(grep -E '^(latency|throughput)' "$OUT/model_${name}_b$batch.txt" | tr '\n' ' ')" >> "$summary"
        [ $rc -ge 128 ] && backtrace_of "$OUT/gdb_model_${name}_b$batch.log" cnnrt bench "$step" --batch "$batch"
      done
      ;;
  esac
  # Packed after every step: a round cut off by its time limit still brings back what it finished.
  cp "$summary" "$FINAL_OUT/summary.txt"
  tar -czf "$FINAL_OUT/round.tar.gz.part" -C "$FINAL_OUT" round && mv "$FINAL_OUT/round.tar.gz.part" "$FINAL_OUT/round.tar.gz"
done
rm -rf "$OUT"
cat "$FINAL_OUT/summary.txt"
