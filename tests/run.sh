#!/usr/bin/env bash
# All tests, in two builds: the release build (build/), then the runtime, tests and the API
# fuzzer under AddressSanitizer and UndefinedBehaviorSanitizer with clang (build-san/, without
# the autoscheduled baselines and benchmarks, which it does not check, and without the CUDA
# kernels, which cannot run on a machine without a GPU: the release build's suites cover how
# CUDA calls fail there; the GPU suite runs on a GPU machine, bench/gpu_session.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -G Ninja
cmake --build build
ctest --test-dir build --output-on-failure -j2

CC=clang-14 CXX=clang++-14 cmake -S . -B build-san -G Ninja -DFSATTN_SANITIZE=ON -DFSATTN_FUZZ=ON \
  -DFSATTN_BASELINES=OFF -DFSATTN_BUILD_BENCH=OFF -DFSATTN_CUDA=OFF
cmake --build build-san
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-san --output-on-failure -j2
