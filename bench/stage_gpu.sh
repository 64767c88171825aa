#!/usr/bin/env bash
# Copies what bench/gpu_session.sh runs on a GPU machine out of a build tree (default
# build/) into .device/: the GPU test suite, the benchmark and tuning binaries, the huge-shape
# CPU test (it needs more memory than the development machine has) and the shared libraries
# they load that a machine with only a CUDA image may lack. Run after cmake --build.
# With a NAME, only that build's libfsattn goes to .device/lib-NAME/, for gpu_session.sh
# compare (same ABI, other kernels). FUZZ_BUILD=<dir> also copies <dir>/tests/fsattn-fuzz.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
if [ $# -ge 2 ]; then
  rm -rf ".device/lib-$2" && mkdir -p ".device/lib-$2" && cp -P "$build"/runtime/libfsattn.so* ".device/lib-$2/"
  exit 0
fi
rm -rf .device && mkdir -p .device/lib
cp "$build"/tests/cuda_test "$build"/tests/huge_shape_test "$build"/bench/fsattn-bench "$build"/bench/fsattn-tune \
  "$build"/bench/fsattn-first-call .device/
cp -P "$build"/runtime/libfsattn.so* .device/lib/
for bin in .device/cuda_test .device/huge_shape_test .device/fsattn-bench .device/fsattn-tune .device/fsattn-first-call; do
  ldd "$bin" | awk '/=> \// {print $3}' | grep -E 'libbenchmark|libgtest|libfsattn' | xargs -r cp -L -t .device/lib/
done
# The API fuzzer for gpu_session.sh fuzz, from a clang build without the sanitizers (FUZZ_BUILD).
if [ -n "${FUZZ_BUILD:-}" ]; then cp "$FUZZ_BUILD"/tests/fsattn-fuzz .device/; fi
du -sh .device
