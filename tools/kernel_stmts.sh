#!/usr/bin/env bash
# Writes the lowered statement (Halide's .stmt: every loop, kernel and buffer of the
# schedule) of each hand-scheduled kernel a build tree generates, one file per kernel, so
# that a change meant to leave the kernels alone (a refactor of the schedules) can be
# checked by diffing two such folders:
#   tools/kernel_stmts.sh BUILD OUT [REGEX]   (after cmake --build BUILD --target fsattn_generators)
#   diff -r OUT_before OUT_after
# Configure BUILD with -DFSATTN_VARIANTS=all to cover every variant; REGEX keeps only the
# kernels whose name matches; JOBS (default 2) lowers that many at once. Lowering is most of
# a kernel's build time (the IDA backward's CUDA kernels: about 6 minutes each on one core).
set -euo pipefail
build=$(cd "$1" && pwd); out=$2; filter=${3:-.}
mkdir -p "$out"; out=$(cd "$out" && pwd)
gen=$build/generators/fsattn_generators
[ -x "$gen" ] || { echo "no $gen: build the fsattn_generators target first" >&2; exit 1; }
# Each kernel's generator arguments, with stmt output for its first target instead of objects;
# the autoscheduled baselines (baseline=true) are left out: they are not our schedules.
grep -o 'fsattn_generators -n [^&|]*' "$build/build.ninja" | grep -v 'baseline=true' |
  sed -e 's/^fsattn_generators //' -e 's/-e c_header,object/-e stmt/' -e "s| -o \. | -o $out |" \
      -e 's/target=\([^, ]*\)[^ ]*/target=\1/' |
  awk -v re="$filter" '$2 ~ re' > "$out/.commands"
cd "$build/generators"
# shellcheck disable=SC2016
xargs -P "${JOBS:-2}" -L 1 sh -c '"$0" "$@" || { echo "FAILED: $2" >&2; exit 255; }' "$gen" < "$out/.commands"
echo "$(ls "$out"/*.stmt | wc -l) statements in $out"
