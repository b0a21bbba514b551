#!/usr/bin/env bash
# CI: builds the `fuzz` preset (clang, libFuzzer, ASan + UBSan; host code only) and runs fuzz_load_plan
# over the committed seed corpus for a bounded time. Any crash, sanitizer report, leak, timeout or
# out-of-memory fails the run; the reproducer is left in build/fuzz/artifacts/ (add it to tests/fuzz/corpus,
# where unit_tests replays it, and fix the engine).
#   scripts/ci_fuzz.sh [seconds]          (default 60)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
seconds=${1:-60}
jobs=${CNNRT_JOBS:-$(nproc 2>/dev/null || echo 2)}

scripts/install-deps.sh --fuzz >&2  # clang and its libFuzzer runtime; a no-op when present
start=$(date +%s)
cmake --preset fuzz > /dev/null
cmake --build --preset fuzz -j "$jobs" --target fuzz_load_plan
built=$(date +%s)

# New inputs go to a scratch corpus so the committed seeds stay as they are.
work=build/fuzz/corpus-work
artifacts=build/fuzz/artifacts
mkdir -p "$work" "$artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
build/fuzz/bin/fuzz_load_plan -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "$work" tests/fuzz/corpus || status=$?
done_at=$(date +%s)
echo "ci_fuzz: build $((built - start)) s, fuzzing $((done_at - built)) s, exit status $status"
if [ "$status" -ne 0 ]; then
  echo "ci_fuzz: the fuzzer found a bug; reproducer(s):" >&2
  ls -l "$artifacts" >&2
  exit 1
fi
