#!/usr/bin/env bash
# One round on a GPU machine (an H100 or H200 without this machine's Debian libraries): GPU tests, GPU
# conformance, sanitizers, benchmarks. Build here first (scripts/build.sh), then bundle:
#   scripts/bundle_device.sh          # programs + libraries + conformance data into .device.tar.xz
# and run, on the GPU machine, from a copy of the repository with the bundle in its root:
#   scripts/gpu_round.sh [tests] [python] [sanitize] [bench | bench:SUITE,SUITE] [zoo | zoo:MODEL,MODEL] [MODEL.onnx...]
# BENCH_FLAGS (e.g. --no-launch-overlap) are added to every `cnnrt bench` of the bench and model steps.
# Full logs and JSON go to $OUT (default /tmp/cnnrt-round); a short summary is printed last.
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
[ -d .device ] || tar -xJf .device.tar.xz
export CNNRT_ONNX_TESTDATA="$repo/.device/testdata"
export CNNRT_FASHION_MNIST="$repo/.device/data/fashion-mnist"
source .device/env.sh  # sets its own variables (among them `here`): keep ours under other names
# Everything goes into $OUT/round/ and is packed into $OUT/round.tar.gz after every step, so that a round cut
# off by a time limit still leaves what finished, in one file easy to copy back.
FINAL_OUT=${OUT:-/tmp/cnnrt-round}
OUT="$FINAL_OUT/round"
mkdir -p "$OUT"
export CNNRT_CACHE_DIR="$OUT/cache"
summary="$OUT/summary.txt"
: > "$summary"
# What ran: the bundle's commit (scripts/bundle_device.sh records it) and the settings of this round.
echo "bundle: $(cat .device/commit.txt 2>/dev/null || echo unknown); round: $*; SANITIZE_JOBS=${SANITIZE_JOBS:-4} SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-300} BENCH_FLAGS=${BENCH_FLAGS:-}" >> "$summary"
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

# The names of the gpu_tests cases the doctest filter FILTER selects, one per line: test_cases FILTER
test_cases() {
  gpu_tests -ltc -tc="$1" 2>/dev/null | sed -n '/^=*$/,/^=*$/p' | grep -v '^=*$' | grep -v '^\[doctest\]'
}

# Packs what the round has so far into $FINAL_OUT: after every step, and inside long steps.
pack_round() {
  cp "$summary" "$FINAL_OUT/summary.txt"
  tar -czf "$FINAL_OUT/round.tar.gz.part" -C "$FINAL_OUT" round && mv "$FINAL_OUT/round.tar.gz.part" "$FINAL_OUT/round.tar.gz"
}

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests bench)
for step in "${steps[@]}"; do
  case "$step" in
    tests)
      # One process per test case: a crash loses only its own case, and is rerun under gdb for a
      # backtrace (the GPU machine has no debugger of its own: bundle_device.sh ships one).
      test_cases '*' > "$OUT/test_cases.txt"
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
    sanitize|sanitize:*|sanitize-all:*)
      # compute-sanitizer, one process per test case, SANITIZE_JOBS (default 4) at a time, each bounded by
      # SANITIZE_TIMEOUT seconds. `sanitize` runs memcheck, racecheck and synccheck over the kernel test cases
      # (every convolution family, pooling, GEMM); `sanitize:TOOL[,TOOL][:CASES]` the tools named, over the
      # kernel cases or the doctest filter CASES;
      # `sanitize-all:TOOL[,TOOL]` over every test case of gpu_tests.
      tools=memcheck,racecheck,synccheck
      cases='c1*,gen:*,small:*,dw:*,tc:*,wgr:*,wgh:*,direct convolution*,MaxPool*,global pools*,Gemm*,*GEMM*'
      case "$step" in
        sanitize:*:*) tools=${step#sanitize:}; cases=${tools#*:}; tools=${tools%%:*} ;;
        sanitize:*) tools=${step#sanitize:} ;;
        sanitize-all:*) tools=${step#sanitize-all:}; cases='*' ;;
      esac
      test_cases "$cases" > "$OUT/sanitize_cases.txt"
      for tool in ${tools//,/ }; do
        dir="$OUT/sanitize_$tool${step%%:*}"
        mkdir -p "$dir"
        i=0
        alone=()
        sanitize_case() {  # sanitize_case INDEX NAME
          timeout "${SANITIZE_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --error-exitcode 99 gpu_tests -tc="${2//,/?}" > "$dir/$1.log" 2>&1
          echo "$? $2" > "$dir/$1.rc"
        }
        while IFS= read -r name; do
          [ -n "$name" ] || continue
          i=$((i + 1))
          # These two check device-wide memory (cudaMemGetInfo counts every process): they run alone, last.
          case "$name" in "inference allocates nothing"*|soak*) alone+=("$i:$name"); continue ;; esac
          while [ "$(jobs -rp | wc -l)" -ge "${SANITIZE_JOBS:-4}" ]; do wait -n; done
          sanitize_case "$i" "$name" &
        done < "$OUT/sanitize_cases.txt"
        wait
        pack_round
        for entry in "${alone[@]}"; do sanitize_case "${entry%%:*}" "${entry#*:}"; pack_round; done
        # memcheck and synccheck end with "ERROR SUMMARY: N errors", racecheck with "RACECHECK SUMMARY: ...".
        clean=$(grep -l -E 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors, 0 warnings\)' "$dir"/*.log 2>/dev/null | wc -l)
        echo "compute-sanitizer $tool over $i test cases ($cases): $clean with a clean summary line; exits: $(cut -d' ' -f1 "$dir"/*.rc | sort | uniq -c | tr '\n' ' ')" >> "$summary"
        grep -v '^0 ' "$dir"/*.rc | head -20 >> "$summary"
        grep -h -E 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]' "$dir"/*.log | head -5 >> "$summary"
      done
      ;;
    sanitize-bench:*)
      # compute-sanitizer over one `cnnrt bench` run of a model (tuning, graph capture, profiling, cuDNN).
      tools=${step#sanitize-bench:}
      for tool in ${tools//,/ }; do
        timeout "${SANITIZE_TIMEOUT:-300}" compute-sanitizer --tool "$tool" --error-exitcode 99 cnnrt bench models/fashion_lenet.onnx --iterations 50 --warmup-ms 0 > "$OUT/sanitize_bench_$tool.log" 2>&1
        echo "compute-sanitizer $tool over cnnrt bench models/fashion_lenet.onnx --iterations 50 --warmup-ms 0: exit $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize_bench_$tool.log" | tr '\n' ' '))" >> "$summary"
      done
      ;;
    profile)
      # Nsight Compute over one batch-1 inference of the shipped model (tuned first, outside the profiler, so
      # the profiled run launches only the plan's kernels), and over the first 24 c1 launches of conv_lab on two
      # special-suite layers (conv_lab checks and times one variant after another: all of its first variant).
      cnnrt infer models/fashion_lenet.onnx samples/fashion_0_ankle_boot.png --batch 1 --no-cuda-graph > /dev/null 2>&1
      sections="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats"
      ncu --clock-control none $sections cnnrt infer models/fashion_lenet.onnx samples/fashion_0_ankle_boot.png --batch 1 --no-cuda-graph > "$OUT/ncu_lenet_b1.txt" 2>&1
      echo "ncu lenet b1: exit $? $(grep -E '^  [a-z_:<>]|Duration' "$OUT/ncu_lenet_b1.txt" | head -20 | tr -s ' ' | tr '\n' ';')" >> "$summary"
      for shape in 1,1,4096,4096,32,5 1,1,512,512,32,5; do
        ncu --clock-control none $sections -k regex:conv2d_c1 --launch-count 24 conv_lab "$shape" > "$OUT/ncu_lab_$shape.txt" 2>&1
        echo "ncu conv_lab $shape: exit $?" >> "$summary"
      done
      ;;
    lab:*)
      # The kernel lab on each shape (N,C,H,W,F,K[,stride,pad] separated by '+'): every variant checked and timed.
      shapes=${step#lab:}
      for shape in ${shapes//+/ }; do
        conv_lab "$shape" > "$OUT/lab_$shape.txt" 2>&1
        echo "conv_lab $shape exit $?: $(grep -v '^#' "$OUT/lab_$shape.txt" | sed -n 1,6p | tr -s ' ' | tr '\n' ';')" >> "$summary"
      done
      ;;
    python)
      # The Python package's tests (tests/python) under the machine's python3 and PyTorch: test_gpu.py's
      # DLPack and stream cases, and every host case, against the bundled cnnrt tool. bundle_device.sh puts
      # the package (for the machine's Python version) into .device/python.
      if [ -d .device/python/cnnrt ]; then
        PYTHONPATH="$repo/.device/python${PYTHONPATH:+:$PYTHONPATH}" CNNRT_CLI=$(command -v cnnrt) PYTHONDONTWRITEBYTECODE=1 \
          python3 -m pytest -v -rs -p no:cacheprovider tests/python > "$OUT/python_tests.log" 2>&1
        echo "python tests exit $?: $(tail -1 "$OUT/python_tests.log")" >> "$summary"
        grep -E "^(FAILED|ERROR|SKIPPED)" "$OUT/python_tests.log" | head -20 >> "$summary"
      else
        echo "python tests: no .device/python/cnnrt in the bundle (see scripts/bundle_device.sh)" >> "$summary"
      fi
      ;;
    soak|soak:*)
      n=2000
      [ "$step" = soak ] || n=${step#soak:}
      CNNRT_SOAK_INFERENCES=$n gpu_tests -tc='soak*' --duration=true > "$OUT/soak.log" 2>&1
      echo "soak $n inferences: exit $? $(grep -E 'MESSAGE|test cases' "$OUT/soak.log" | tr '\n' ' ')" >> "$summary"
      ;;
    bench|bench:*)
      suites="special general small"
      [ "$step" = bench ] || suites=${step#bench:}
      for suite in ${suites//,/ }; do
        cnnrt bench ${BENCH_FLAGS:-} --suite "$suite" --json "$OUT/bench_$suite.json" > "$OUT/bench_$suite.txt" 2> "$OUT/bench_$suite.err"
        echo "bench $suite exit $?: $(tail -1 "$OUT/bench_$suite.txt")" >> "$summary"
      done
      ;;
    zoo|zoo:*)
      # The model zoo against PyTorch (scripts/zoo_bench.py, with the machine's python3, torch and onnx): `zoo`
      # every model, `zoo:NAME,NAME` those. ZOO_FLAGS (e.g. --quick, --batches 1,16) are passed on.
      models=()
      [ "$step" = zoo ] || models=(--models "${step#zoo:}")
      stdbuf -oL -eL python3 scripts/zoo_bench.py "${models[@]}" ${ZOO_FLAGS:-} --out "$OUT/zoo" > "$OUT/zoo_bench.txt" 2>&1
      echo "zoo bench ${step}: exit $? ($(grep -c 'cnnrt .* us, PyTorch graph' "$OUT/zoo_bench.txt") cases timed)" >> "$summary"
      grep -E 'FAILED|MISMATCH|zoo_bench:' "$OUT/zoo_bench.txt" | head -20 >> "$summary"
      cat "$OUT/zoo/zoo_bench.md" >> "$summary" 2>/dev/null
      ;;
    *.onnx)
      name=$(basename "$step" .onnx)
      for batch in 1 4096; do
        stdbuf -oL -eL cnnrt bench ${BENCH_FLAGS:-} "$step" --batch "$batch" --json "$OUT/model_${name}_b$batch.json" > "$OUT/model_${name}_b$batch.txt" 2>&1
        rc=$?
        echo "model $name batch $batch exit $rc: $(grep -E '^(latency|throughput)' "$OUT/model_${name}_b$batch.txt" | tr '\n' ' ')" >> "$summary"
        [ $rc -ge 128 ] && backtrace_of "$OUT/gdb_model_${name}_b$batch.log" cnnrt bench "$step" --batch "$batch"
      done
      ;;
  esac
  echo "  (step $step done at ${SECONDS}s)" >> "$summary"
  pack_round
done
rm -rf "$OUT"
cat "$FINAL_OUT/summary.txt"
