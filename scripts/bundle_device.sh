#!/usr/bin/env bash
# Packs what a GPU round needs into .device/ (kept out of git): the release programs with the Debian
# libraries they link (../shared/device/bundle.sh), and the ONNX conformance cases the CPU backend passes
# (the GPU machine has no libonnx-testdata), packed as .device.tar.xz. Run after
# `cmake --build --preset release`.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bin=build/release/bin
# gdb too, when this machine has it: the GPU machine has no debugger, and gpu_round.sh reruns a crash under it.
# BUNDLE_GDB=0 leaves it (and the Python it embeds) out: the device tool carries at most 64 MiB with the repo.
gdb_path=""
[ "${BUNDLE_GDB:-1}" = 1 ] && gdb_path=$(command -v gdb || true)
rm -rf .device
"$here/../shared/device/bundle.sh" .device "$bin/cnnrt" "$bin/gpu_tests" "$bin/conv_lab" "$bin/chain_trace" "$bin/cluster_sync_check" "$bin/launch_floor" "$bin/wgmma_peak" $gdb_path
if [ -n "$gdb_path" ]; then
  # gdb embeds Python and will not start without its standard library (gpu_round.sh sets PYTHONHOME).
  py=/usr/lib/python3.$(ldd "$(command -v gdb)" | sed -n 's/.*libpython3\.\([0-9]*\).*/\1/p' | head -1)
  mkdir -p .device/py/lib
  tar -C "$(dirname "$py")" --exclude test --exclude site-packages --exclude dist-packages --exclude idlelib \
    --exclude tkinter --exclude ensurepip --exclude lib2to3 --exclude pydoc_data --exclude __pycache__ \
    --exclude 'config-*' -cf - "$(basename "$py")" | tar -C .device/py/lib -xf -
  mkdir -p .device/gdb-data && cp -r /usr/share/gdb/python .device/gdb-data/
fi
# The Python package, built for the GPU machine's Python (3.12 there: DEVICE_PYTHON_TAG=cpython-312). The
# release build has it when configured with -DCNNRT_PYTHON_EXTRA_INTERPRETERS=<a Python 3.12 with its
# headers>; its Debian libraries are the programs', already in .device/lib (checked below).
py_tag=${DEVICE_PYTHON_TAG:-cpython-312}
if compgen -G "build/release/python/cnnrt/_cnnrt.$py_tag-*.so" > /dev/null; then
  mkdir -p .device/python/cnnrt
  cp build/release/python/cnnrt/__init__.py build/release/python/cnnrt/__init__.pyi build/release/python/cnnrt/py.typed \
    build/release/python/cnnrt/*."$py_tag"-*.so .device/python/cnnrt/
  for lib in $(ldd .device/python/cnnrt/*.so | awk '/=> \//{print $3}' | sort -u); do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libgcc_s.so*|libstdc++.so*|libz.so*) ;;
      libcuda.so*|libcudnn*|libcublas*|libcudart*|libnvrtc*|libnvJitLink*|_cnnrt.*) ;;
      *) [ -e ".device/lib/$(basename "$lib")" ] || cp -L "$lib" .device/lib/ ;;
    esac
  done
else
  echo "bundle_device: no Python extension for $py_tag in build/release/python: the python step of gpu_round.sh" \
       "will have nothing to test (configure with -DCNNRT_PYTHON_EXTRA_INTERPRETERS=/path/to/python3.12)" >&2
fi
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
# The commit the programs were built from (with "-dirty" if the tree had uncommitted changes).
git describe --always --dirty > .device/commit.txt 2>/dev/null || echo unknown > .device/commit.txt
XZ_OPT="-T2 ${XZ_OPT:--6}" tar -cJf .device.tar.xz .device
du -sh .device .device.tar.xz
