#!/usr/bin/env bash
# All tests, in two builds: the release build (build/) and the Python package over it, then
# the runtime, tests and the API fuzzer under AddressSanitizer and UndefinedBehaviorSanitizer
# with clang (build-san/). The
# sanitizer build links the release build's kernels (FSATTN_KERNELS_FROM) rather than
# generating them again: it checks the runtime and the calls, not the kernels' compiler.
# The CUDA suite skips where there is no GPU (here, only how CUDA calls fail is checked); it
# runs on a GPU machine (bench/gpu_session.sh). Builds with -DFSATTN_BASELINES=ON also check
# the autoscheduled baselines against the reference. Every schedule variant is built
# (FSATTN_VARIANTS=all), so that each is checked against the reference.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.deps/bin:$PATH"  # CMake 3.28+ and Halide 21 (.ci/install-deps.sh)
# Formatting first (seconds): every C, C++ and CUDA source as .clang-format says.
if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  git ls-files -z '*.c' '*.cpp' '*.cu' '*.h' | xargs -0 clang-format-14 --dry-run --Werror
fi
cmake -S . -B build -G Ninja -DFSATTN_VARIANTS=all
cmake --build build
ctest --test-dir build --output-on-failure -j2

# The Python package over this build, on the CPU, with Debian's PyTorch (python/README.md).
/usr/bin/python3 -m venv --system-site-packages build/python-venv
FSATTN_BUILD_DIR="$PWD/build" build/python-venv/bin/pip install -q ./python
(cd python && ../build/python-venv/bin/python -m pytest -q -p no:cacheprovider tests)

CC=clang-14 CXX=clang++-14 cmake -S . -B build-san -G Ninja -DFSATTN_SANITIZE=ON -DFSATTN_FUZZ=ON \
  -DFSATTN_BUILD_BENCH=OFF -DFSATTN_KERNELS_FROM="$PWD/build"
cmake --build build-san
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-san --output-on-failure -j2
