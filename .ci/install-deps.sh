#!/usr/bin/env bash
# Installs every Debian 12 package that building and testing fsattn needs.
set -euo pipefail
packages=(
  build-essential cmake ninja-build      # toolchain
  libhalide14-0-dev llvm-14-dev          # Halide 14 and the LLVM it was built with
  libgtest-dev libbenchmark-dev          # tests and benchmarks
  nlohmann-json3-dev libcli11-dev        # header-only: JSON (tuning files), the tools' options
  zlib1g-dev libpng-dev                  # PNG plots written by the examples
  clang-14 libclang-rt-14-dev            # the sanitizer build and the API fuzzer (libFuzzer)
  clang-format-14                        # the sources' format, checked by tests/run.sh
  python3-dev python3-venv                # the Python package (python/); pip fetches its
  python3-torch python3-pytest            #   build tools from PyPI, never PyTorch
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
