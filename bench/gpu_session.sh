#!/usr/bin/env bash
# Runs on a machine with an NVIDIA GPU, from the repository root, over binaries built
# elsewhere and staged by bench/stage_gpu.sh in .device/ (nothing is built here): the GPU
# test suite, the suite again under compute-sanitizer (memcheck, racecheck) on small shapes,
# the CUDA benchmarks (JSON), the PyTorch peers, and a short table last.
#   bash bench/gpu_session.sh [tests|sanitize|huge|tune|bench|compare|firstcall|profile|peers ...]
# (default: tests sanitize bench peers; huge: the >2^31-element CPU test, which needs
# ~31 GB of memory; bench times what BENCH_FILTER matches, by default 'cuda|step'; tune:
# fsattn-tune over every variant at its default shapes, CPU and GPU (or as TUNE_ARGS says,
# e.g. '--device cuda --op ida_step'), writing tuning.json;
# compare: the default variants at the benchmark shape and the steps at B=64, over the
# library in .device/lib and over each other build's staged in .device/lib-NAME/ (bash
# bench/stage_gpu.sh BUILD NAME), alternated twice; firstcall: fsattn-first-call with the
# driver's PTX cache disabled, then cold, then warm;
# profile: per-kernel times of one call of each default forward at the benchmark shape, from Nsight
# Compute; fuzz: the API fuzzer in its CUDA mode under compute-sanitizer memcheck, the kept
# corpus replayed, then FUZZ_SECONDS (default 180) of fuzzing (.device/fsattn-fuzz: built
# with clang and -DFSATTN_FUZZ=ON but without the sanitizers, which CUDA's memcheck replaces;
# bench/stage_gpu.sh copies it from FUZZ_BUILD); python: builds the Python extension there (CMake, pybind11 from .whl/) over
# .device/lib and runs python/tests, CUDA tests included; peers also times SDPA flash attention against sequence length for bench/plot.py,
# and FLA's chunk_gsa where a copy of FLA's fla/ package is in .peers/, an ignored directory).
# Logs and results go to $OUT (or ./gpu-results).
set -uo pipefail
OUT=${OUT:-$PWD/gpu-results}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests sanitize bench peers)
log=$OUT/log
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv | tee -a "$log"
small='*T1*:*odd*:*S1*:*M0*:CudaProperties.StatesInPlace:CudaArguments*:*StepCuda*'
for step in "${steps[@]}"; do
  case $step in
    tests)
      timeout 420 .device/cuda_test --gtest_brief=1 2>&1 | tee -a "$log" | tail -40 ;;
    sanitize)
      for tool in memcheck racecheck; do
        timeout 240 compute-sanitizer --tool $tool --print-limit 20 .device/cuda_test --gtest_brief=1 \
          --gtest_filter="$small" > "$OUT/sanitizer-$tool.txt" 2>&1
        echo "compute-sanitizer $tool: exit $? :: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer-$tool.txt" | tail -1)" | tee -a "$log"
      done ;;
    huge)
      timer=(); [ -x /usr/bin/time ] && timer=(/usr/bin/time -v)  # peak memory, where it is installed
      SECONDS=0
      FSATTN_HUGE_TESTS=1 timeout 400 "${timer[@]}" .device/huge_shape_test 2>&1 | tee "$OUT/huge.txt" |
        grep -E "elements|OK \]|FAILED|PASSED|Maximum resident" | tee -a "$log"
      echo "huge_shape_test: ${SECONDS} s" | tee -a "$log" ;;
    tune)
      timeout 400 .device/fsattn-tune ${TUNE_ARGS:-} --out "$OUT/tuning.json" 2>&1 | tee -a "$log" ;;
    bench)
      timeout 400 .device/fsattn-bench --benchmark_filter="${BENCH_FILTER:-cuda|step}" --benchmark_out="$OUT/bench.json" \
        --benchmark_out_format=json 2>&1 | tee -a "$log" | grep -E "cuda|step|Run" ;;
    compare)
      filter='^(ida|bla)_forward(\+backward)?/cuda/cuda_c32_r4_l8/iter|_step/cuda[a-z0-9_]*/B=64/'
      for r in 1 2; do
        for lib in .device/lib .device/lib-*; do
          [ -d "$lib" ] || continue
          LD_LIBRARY_PATH=$PWD/$lib:$PWD/.device/lib timeout 200 .device/fsattn-bench --benchmark_filter="$filter" \
            2>&1 | grep -E '^(ida|bla)' | sed "s|^|$(basename "$lib") |" | tee -a "$log"
        done
      done ;;
    firstcall)
      cache=$(mktemp -d)
      for mode in disabled cold warm; do
        echo "fsattn-first-call, PTX cache $mode:" | tee -a "$log"
        if [ $mode = disabled ]; then
          CUDA_CACHE_DISABLE=1 timeout 120 .device/fsattn-first-call 2>&1 | tee -a "$log"
        else
          CUDA_CACHE_PATH=$cache timeout 120 .device/fsattn-first-call 2>&1 | tee -a "$log"
        fi
      done ;;
    profile)
      for op in ida_forward bla_forward; do
        timeout 240 ncu --clock-control none --launch-skip 150 --launch-count 60 --print-summary per-kernel \
          .device/fsattn-bench --benchmark_filter="^$op/cuda/cuda_c32_r4_l8/iter" > "$OUT/ncu-$op.txt" 2>&1
        echo "ncu $op: exit $?" | tee -a "$log"
      done ;;
    peers)
      fla=(); [ -d .peers/fla ] && fla=(--methods ida_torch bla_torch sdpa_flash fla_gsa fla_gsa_bf16 --fla .peers)
      timeout 300 python3 bench/peer_gpu.py "${fla[@]}" --json "$OUT/peers.json" 2>&1 | tee -a "$log" | tail -15
      timeout 200 python3 bench/peer_gpu.py --methods sdpa_flash --seqlens 1024 2048 4096 8192 16384 32768 65536 \
        --json "$OUT/seqlen.json" 2>&1 | tee -a "$log" | tail -9 ;;
    fuzz)
      export FSATTN_FUZZ_DEVICE=cuda
      memcheck=(compute-sanitizer --tool memcheck --print-limit 20)
      timeout 240 "${memcheck[@]}" .device/fsattn-fuzz -runs=0 -timeout=60 -rss_limit_mb=16384 \
        -print_final_stats=1 tests/fuzz/corpus > "$OUT/fuzz-replay.txt" 2>&1
      echo "fuzz corpus replay, CUDA, memcheck: exit $? :: $(grep -E 'ERROR SUMMARY' "$OUT/fuzz-replay.txt" | tail -1)" | tee -a "$log"
      rm -rf /tmp/fsattn-fuzz && mkdir -p /tmp/fsattn-fuzz
      timeout $((${FUZZ_SECONDS:-180} + 120)) "${memcheck[@]}" .device/fsattn-fuzz -max_total_time=${FUZZ_SECONDS:-180} \
        -timeout=60 -rss_limit_mb=16384 -print_final_stats=1 /tmp/fsattn-fuzz tests/fuzz/corpus > "$OUT/fuzz-cuda.txt" 2>&1
      echo "fuzz ${FUZZ_SECONDS:-180} s, CUDA, memcheck: exit $? :: $(grep -E 'number_of_executed_units' "$OUT/fuzz-cuda.txt")" \
        "$(grep -E 'ERROR SUMMARY' "$OUT/fuzz-cuda.txt" | tail -1)" | tee -a "$log"
      unset FSATTN_FUZZ_DEVICE ;;
    python)
      py=/tmp/fsattn-python; rm -rf $py && mkdir -p $py/tree/runtime && cp -P .device/lib/libfsattn.so* $py/tree/runtime/
      { cmake -S python -B $py/build -DFSATTN_BUILD_DIR=$py/tree -DPython_EXECUTABLE="$(command -v python3)" \
          -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" > $py/cmake.log 2>&1 &&
        cmake --build $py/build -j 8 >> $py/cmake.log 2>&1 && cp $py/build/_ext*.so python/src/fsattn/; } ||
        { tail -20 $py/cmake.log | tee -a "$log"; continue; }
      (cd python && PYTHONPATH=$PWD/src timeout 300 python3 -m pytest -q -p no:cacheprovider -rs tests) 2>&1 |
        tee -a "$log" | tail -25 ;;
  esac
done
