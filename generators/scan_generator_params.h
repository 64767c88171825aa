// GeneratorParams shared by the generators built on the chunked scan: the schedule knobs of
// scope SCAN (knob_params.h) and the baseline form. A generator inherits this next to
// Halide::Generator<T>; Halide finds GeneratorParams anywhere inside the generator object.
#pragma once

#include "Halide.h"
#include "grid.h"
#include "knob_params.h"

#include <cstdlib>

namespace fsattn {

class ScanGeneratorParams : public KnobParams {
 public:
  explicit ScanGeneratorParams(int default_chunk) : KnobParams(default_chunk) {}

  // The form Halide 14's autoschedulers can schedule, for the baselines: intra-chunk
  // reductions masked (Masking::all), and the channel, mode/slot and head counts fixed
  // to the benchmark shape's (they unroll loops whose extents are not constants otherwise).
  // Such a kernel refuses other sizes with a Halide error.
  Halide::GeneratorParam<bool> baseline{"baseline", false};

  // Which within-chunk sums are masked (Masking, grid.h). The CUDA register tiles run over
  // the whole chunk, so their causal sums are masked rather than bounded per token (which kept
  // their operands from being copied as vectors); the reads by channels over the token stay
  // bounded, slower masked. The measurements: docs/performance-log.md.
  Masking masking(const Halide::Target &target) const {
    if (baseline) return Masking::all;
    return target.has_feature(Halide::Target::CUDA) ? Masking::gpu : Masking::none;
  }

  Knobs knobs(const Halide::Target &target) const { return KnobParams::knobs(target, KnobScope::SCAN); }

  // Every buffer's mins stated to be 0, as the runtime passes them (runtime/src/calls.cpp):
  // the CUDA kernels' indices into their stages are then known multiples of the aligned row
  // lengths, which their vector loads need (schedules/cuda/tiles.cpp, vector_tile_reduction).
  template <typename... Buffers>
  static void mins_at_zero(Buffers &...buffers) {
    auto zero = [](auto &b) {
      for (int d = 0; d < b.dimensions(); ++d) b.dim(d).set_min(0);
    };
    (zero(buffers), ...);
  }

  // Adams2019's default beam (32) exhausts 24 GiB on these pipelines and beams 1-2 emit
  // schedules Halide rejects; 4 works (2-4 min per kernel on 2 cores). Read when the
  // autoscheduler runs, after schedule().
  static void narrow_autoscheduler_beam() { setenv("HL_BEAM_SIZE", "4", /*overwrite=*/0); }
};

}  // namespace fsattn
