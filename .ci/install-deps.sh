#!/usr/bin/env bash
# Installs what building and testing fsattn needs: Debian 12 packages with apt-get, then
# Halide and a CMake new enough for Halide's package files (3.28 or later; Debian 12 has
# 3.25) from PyPI into the project's own environment, .deps/ (ignored by git). Use
# .deps/bin/cmake, or put .deps/bin first on PATH; CMake finds Halide in .deps/ itself.
set -euo pipefail
packages=(
  build-essential ninja-build            # toolchain (CMake comes from PyPI, below)
  libgtest-dev libbenchmark-dev          # tests and benchmarks
  nlohmann-json3-dev libcli11-dev        # header-only: JSON (tuning files), the tools' options
  zlib1g-dev libpng-dev                  # PNG plots written by the examples
  clang-14 libclang-rt-14-dev            # the sanitizer build and the API fuzzer (libFuzzer)
  clang-format-14                        # the sources' format, checked by tests/run.sh
  python3-dev python3-venv               # .deps/, Halide's CMake package, the Python package
  python3-torch python3-pytest           #   (python/; pip fetches its build tools, never PyTorch)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Pinned: the kernels, their schedules and the measurements in docs/ are Halide 21.0.0's.
halide_version=21.0.0
cmake_version=3.31.6
deps="$(cd "$(dirname "$0")/.." && pwd)/.deps"
[ -x "$deps/bin/pip" ] || /usr/bin/python3 -m venv "$deps"
installed=$("$deps/bin/pip" list --format=freeze 2>/dev/null)
if ! grep -qx "halide==$halide_version" <<< "$installed" || ! grep -qx "cmake==$cmake_version" <<< "$installed"; then
  "$deps/bin/pip" install -q --disable-pip-version-check "halide==$halide_version" "cmake==$cmake_version"
fi
