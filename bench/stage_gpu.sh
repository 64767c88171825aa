#!/usr/bin/env bash
# Copies what bench/gpu_session.sh runs on a GPU machine out of a build tree (default
# build/) into .device/: the GPU test suite, the benchmark and tuning binaries, the huge-shape
# CPU test (it needs more memory than the development machine has) and the shared libraries
# they load that a machine with only a CUDA image may lack. Run after cmake --build.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
rm -rf .device && mkdir -p .device/lib
cp "$build"/tests/cuda_test "$build"/tests/huge_shape_test "$build"/bench/fsattn-bench "$build"/bench/fsattn-tune .device/
cp -P "$build"/runtime/libfsattn.so* .device/lib/
for bin in .device/cuda_test .device/huge_shape_test .device/fsattn-bench .device/fsattn-tune; do
  ldd "$bin" | awk '/=> \// {print $3}' | grep -E 'libbenchmark|libgtest|libfsattn' | xargs -r cp -L -t .device/lib/
done
du -sh .device
