#!/usr/bin/env bash
# CI: builds the `sanitize` preset (host code only, AddressSanitizer + UndefinedBehaviorSanitizer, no CUDA)
# and runs unit_tests under it through CTest. Any sanitizer report aborts the test (-fno-sanitize-recover=all),
# so a report fails the run. Prints how long the build and the tests took.
#   scripts/ci_sanitize.sh [extra ctest arguments]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
jobs=${CNNRT_JOBS:-$(nproc 2>/dev/null || echo 2)}

# detect_leaks: LeakSanitizer is part of ASan on Linux; keep it on. halt_on_error: first report ends the test.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

scripts/install-deps.sh >&2  # a no-op when every package is present
start=$(date +%s)
cmake --preset sanitize > /dev/null
cmake --build --preset sanitize -j "$jobs" --target unit_tests
built=$(date +%s)
status=0
ctest --preset sanitize -j "$jobs" "$@" || status=$?
done_at=$(date +%s)
echo "ci_sanitize: build $((built - start)) s, tests $((done_at - built)) s, total $((done_at - start)) s," \
  "ctest exit status $status"
exit "$status"
