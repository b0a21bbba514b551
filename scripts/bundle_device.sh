#!/usr/bin/env bash
# Packs what scripts/gpu_round.sh needs on a GPU machine that has the NVIDIA driver, CUDA 13 and cuDNN 9 but
# none of this machine's Debian libraries, into .device/ (kept out of git), shipped as .device.tar.xz:
#   bin/      the release programs (cnnrt, gpu_tests, the kernel lab's programs) and, when present, gdb
#   lib/      the shared libraries they link that the GPU machine lacks (protobuf, onnx, spdlog, fmt, ...)
#   env.sh    `source .device/env.sh` puts bin/ on PATH and lib/, cuDNN and the CUDA libraries on
#             LD_LIBRARY_PATH
#   testdata/ the ONNX conformance cases the CPU backend passes (the GPU machine has no libonnx-testdata)
#   data/     Fashion-MNIST's test set
# Run after `cmake --build --preset release` (scripts/build.sh).
# Each program of the release build links every kernel (about 25 MB of machine code for sm_90 alone). For a bundle
# that travels with the repository in a small transfer, build the engine as a shared library, so that the programs
# share one copy, and leave the conformance data out:
#   cmake -S . -B build/sm90 -G Ninja -DCMAKE_BUILD_TYPE=Release -DCNNRT_BUILD_LAB=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
#         -DBUILD_SHARED_LIBS=ON && cmake --build build/sm90
#   BUNDLE_BUILD=build/sm90 BUNDLE_GDB=0 BUNDLE_DATA=0 scripts/bundle_device.sh   # about 29 MB of .device.tar.xz
# (BUNDLE_DATA=0: no testdata/ and data/; the GPU conformance and Fashion-MNIST test cases then have nothing to read.)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
build=${BUNDLE_BUILD:-build/release}  # another build folder (one of fewer architectures) for a smaller bundle
bin=$build/bin
dest=.device
programs=("$bin/cnnrt" "$bin/gpu_tests" "$bin/conv_lab" "$bin/cluster_sync_check"
          "$bin/launch_floor" "$bin/wgmma_peak" "$bin/net_lab" "$bin/seqnet_lab")
# gdb too, when this machine has it: the GPU machine has no debugger, and gpu_round.sh reruns a crash under it.
# BUNDLE_GDB=0 leaves it (and the Python it embeds) out, for a smaller bundle.
gdb_path=""
[ "${BUNDLE_GDB:-1}" = 1 ] && gdb_path=$(command -v gdb || true)
[ -n "$gdb_path" ] && programs+=("$gdb_path")
for program in "${programs[@]}"; do
  [ -x "$program" ] || { echo "bundle_device: $program is missing; build the release preset first" >&2; exit 1; }
done

rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/lib"
# Each program, and each library the loader resolves for it, except those the GPU machine provides itself:
# the C and C++ runtimes and zlib (the base system), and the NVIDIA driver, CUDA and cuDNN libraries.
provided_there() {
  case "$1" in
    ld-linux*|libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|libgcc_s.so*|libstdc++.so*|libz.so*) return 0 ;;
    libcuda.so*|libnvidia*|libcudart*|libcudnn*|libcublas*|libcufft*|libcurand*|libnvrtc*|libnvJitLink*) return 0 ;;
  esac
  return 1
}
for program in "${programs[@]}"; do
  cp -L "$program" "$dest/bin/"
  ldd "$program" | while read -r name arrow path _; do
    [ "$arrow" = "=>" ] && [ -f "$path" ] || continue
    provided_there "$name" || [ -e "$dest/lib/$name" ] || cp -L "$path" "$dest/lib/$name"
  done
done
cat > "$dest/env.sh" <<'ENV'
# Sourced on the GPU machine: the bundled programs and libraries first, then cuDNN (a system install, or the
# one inside Python's nvidia-cudnn package) and the CUDA Toolkit's libraries.
bundle_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cudnn_dir=""
if ! ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9'; then
  cudnn_dir=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' \
              2>/dev/null || true)
fi
# cuBLASLt (the Gemm candidates): the CUDA Toolkit's, else the one inside Python's nvidia packages.
cublas_dir=""
if [ ! -e /usr/local/cuda/lib64/libcublasLt.so.13 ] && ! ldconfig -p 2>/dev/null | grep -q 'libcublasLt\.so\.13'; then
  cublas_dir=$(python3 -c 'import glob, os, nvidia; print(next((os.path.dirname(f) for d in nvidia.__path__ for f in glob.glob(os.path.join(d, "**", "libcublasLt.so.13"), recursive=True)), ""))' \
               2>/dev/null || true)
fi
export LD_LIBRARY_PATH="$bundle_dir/lib${cudnn_dir:+:$cudnn_dir}${cublas_dir:+:$cublas_dir}:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$bundle_dir/bin:$PATH"
unset bundle_dir cudnn_dir cublas_dir
ENV

if [ -n "$gdb_path" ]; then
  # gdb embeds Python and will not start without its standard library (gpu_round.sh sets PYTHONHOME).
  py=/usr/lib/python3.$(ldd "$gdb_path" | sed -n 's/.*libpython3\.\([0-9]*\).*/\1/p' | head -1)
  mkdir -p "$dest/py/lib"
  tar -C "$(dirname "$py")" --exclude test --exclude site-packages --exclude dist-packages --exclude idlelib \
    --exclude tkinter --exclude ensurepip --exclude lib2to3 --exclude pydoc_data --exclude __pycache__ \
    --exclude 'config-*' -cf - "$(basename "$py")" | tar -C "$dest/py/lib" -xf -
  mkdir -p "$dest/gdb-data" && cp -r /usr/share/gdb/python "$dest/gdb-data/"
fi
# The Python package, built for the GPU machine's Python (3.12 there: DEVICE_PYTHON_TAG=cpython-312). The
# release build has it when configured with -DCNNRT_PYTHON_EXTRA_INTERPRETERS=<a Python 3.12 with its
# headers>; its Debian libraries are the programs', already in .device/lib (checked below).
py_tag=${DEVICE_PYTHON_TAG:-cpython-312}
if compgen -G "$build/python/cnnrt/_cnnrt.$py_tag-*.so" > /dev/null; then
  mkdir -p .device/python/cnnrt
  cp "$build"/python/cnnrt/__init__.py "$build"/python/cnnrt/__init__.pyi "$build"/python/cnnrt/py.typed \
    "$build"/python/cnnrt/*."$py_tag"-*.so .device/python/cnnrt/
  for lib in $(ldd .device/python/cnnrt/*.so | awk '/=> \//{print $3}' | sort -u); do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libgcc_s.so*|libstdc++.so*|libz.so*) ;;
      libcuda.so*|libcudnn*|libcublas*|libcudart*|libnvrtc*|libnvJitLink*|_cnnrt.*) ;;
      *) [ -e ".device/lib/$(basename "$lib")" ] || cp -L "$lib" .device/lib/ ;;
    esac
  done
else
  echo "bundle_device: no Python extension for $py_tag in $build/python: the python step of gpu_round.sh" \
       "will have nothing to test (configure with -DCNNRT_PYTHON_EXTRA_INTERPRETERS=/path/to/python3.12)" >&2
fi
# The programs and libraries without their symbol tables (backtraces keep the function names of exported symbols).
command -v strip > /dev/null && strip --strip-unneeded "$dest"/bin/* "$dest"/lib/* 2> /dev/null || true
# Conformance data: every case the CPU suite passes, found by running it here.
if [ "${BUNDLE_DATA:-1}" = 1 ]; then
  report=$(mktemp)
  CNNRT_CONFORMANCE_REPORT="$report" "$bin/unit_tests" -tc="ONNX conformance on the CPU backend" > /dev/null 2>&1 || true
  mkdir -p "$dest/testdata"
  grep '^passed' "$report" | cut -f2 | while read -r case_name; do
    mkdir -p "$dest/testdata/$(dirname "$case_name")"
    cp -r "/usr/share/libonnx-testdata/data/$case_name" "$dest/testdata/$case_name"
  done
  rm -f "$report"
  # Fashion-MNIST's test set, for the GPU-against-CPU prediction test (tests/gpu/test_runtime.cpp).
  mkdir -p "$dest/data/fashion-mnist"
  cp /usr/share/datasets/fashion-mnist/t10k-*.gz "$dest/data/fashion-mnist/"
fi
# The commit the programs were built from, as cnnrt --version also reports it.
"$bin/cnnrt" --version | sed -n 's/.*(commit \(.*\))$/\1/p' > "$dest/commit.txt"
XZ_OPT="-T2 ${XZ_OPT:--6}" tar -cJf .device.tar.xz "$dest"
du -sh "$dest" .device.tar.xz
