#!/usr/bin/env bash
# The README's second command: installs what is missing, builds everything and runs the whole test suite
# through CTest. GPU test cases skip (visibly) where there is no GPU.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
scripts/install-deps.sh
build=$(scripts/build.sh)
cd "$build"
ctest --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@"
