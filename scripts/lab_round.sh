#!/usr/bin/env bash
# Runs conv_lab on each shape given (N,C,H,W,F,K[,stride,pad]) on the GPU machine and writes one file per
# shape under $OUT (names without commas, which some copy tools refuse), then prints the fastest of each.
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
[ -d .device ] || tar -xJf .device.tar.xz
source .device/env.sh
for shape in "$@"; do
  out="${OUT:-/tmp}/lab_${shape//,/_}.txt"
  conv_lab "$shape" > "$out" 2>&1
  head -7 "$out"
done
