#!/usr/bin/env bash
# Packs what the GPU checks need on a machine that has CUDA and PyTorch but none of cairn's
# Debian build dependencies (issue 21): the stripped cairn and unit-test binaries, the
# tests/fake_cuda emulations the GPU-slot tests use, and every shared library the binaries
# load from this machine except the C library and the C++ runtime (the GPU machine's own,
# newer ones serve; putting Debian 12's libstdc++ first would break its PyTorch).
#
#   tests/gpu/bundle.sh [BUILD_DIR] [OUT_DIR]   (defaults: build, .gpu)
#
# Then, on the GPU machine, from the repository root: tests/gpu/device_checks.sh OUT_DIR
set -euo pipefail
build=${1:-build}
out=${2:-.gpu}
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for exe in cairn cairn_unit_tests; do
  strip -o "$out/bin/$exe" "$build/$exe"
done
for dir in fake_cuda fake_cuda_old fake_nccl_old fake_nvrtc; do
  if [[ -d $build/$dir ]]; then cp -a "$build/$dir" "$out/bin/"; fi
done
# Every library either binary resolves here, less glibc's and the compiler runtime's.
ldd "$build/cairn" "$build/cairn_unit_tests" | awk '/=> \// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done
tar -C "$(dirname "$out")" -czf "$out.tar.gz" "$(basename "$out")"
rm -rf "$out"
mkdir -p "$out"
mv "$out.tar.gz" "$out/bundle.tar.gz"
du -sh "$out/bundle.tar.gz"
