// GeneratorParams shared by the generators built on the chunked scan: the CPU schedule's
// knobs (schedules/knobs.h) and the baseline form. A generator inherits this next to
// Halide::Generator<T>; Halide finds GeneratorParams anywhere inside the generator object.
#pragma once

#include "Halide.h"
#include "grid.h"
#include "schedules/knobs.h"

#include <cstdlib>

namespace fsattn {

class ScanGeneratorParams {
 public:
  explicit ScanGeneratorParams(int default_chunk) : chunk("chunk", default_chunk) {}

  Halide::GeneratorParam<int> chunk;                          // tokens per chunk (L)
  Halide::GeneratorParam<int> vector{"vector", 0};            // 0: the target's natural width
  Halide::GeneratorParam<int> tile_vectors{"tile_vectors", 2};  // register tiles (knobs.h)
  Halide::GeneratorParam<int> tile_rows{"tile_rows", 4};
  Halide::GeneratorParam<int> threads{"threads", 128};        // CUDA threads per block
  Halide::GeneratorParam<int> gpu_tile{"gpu_tile", 1};        // CUDA register tiles (knobs.h)
  Halide::GeneratorParam<int> large_tile{"large_tile", 0};    // CUDA large register tiles (knobs.h)
  // The form Halide 14's autoschedulers can schedule, for the baselines: intra-chunk
  // reductions masked (Masking::all), and the channel, mode/slot and head counts fixed
  // to the benchmark shape's (they unroll loops whose extents are not constants otherwise).
  // Such a kernel refuses other sizes with a Halide error.
  Halide::GeneratorParam<bool> baseline{"baseline", false};

  // Which within-chunk sums are masked (Masking, grid.h). The CUDA schedules mask the reads by
  // slots: bounded, each register tile tested the bound per token of its patch inside the
  // loop over the whole chunk (half of it masked off, not skipped), and its operands could not
  // be copied as vectors (schedules/cuda.cpp, vector_tile_reduction). Masked (Nsight Compute,
  // B=8 T=4096 H=16 D=M=S=64, chunk 32, on an H100): BLA's o_intra 426 -> 250 us, IDA's
  // 416 -> 239 us. They also sum IDA's forward reads by channels over the lag
  // (read_by_channels): its p_intra 577 -> 409 us. The reads by channels over the token stay
  // bounded: masked as well, IDA's p_intra took 576 -> 1240 us and BLA's z_intra 268 -> 276 us
  // (H200). The whole change on the H100 (with the per-token sums in registers,
  // gpu_chunk_rows; fsattn-bench, two rounds in one run, cuda_c32_r4_l8): IDA forward 7.40 ->
  // 6.97 ms, forward+backward 35.0 -> 34.2; BLA forward 3.69 -> 3.46, forward+backward 14.2 ->
  // 14.0.
  Masking masking(const Halide::Target &target) const {
    if (baseline) return Masking::all;
    return target.has_feature(Halide::Target::CUDA) ? Masking::gpu : Masking::none;
  }

  CpuKnobs cpu_knobs(const Halide::Target &target) const {
    CpuKnobs k;
    k.chunk = chunk;
    k.vector = vector > 0 ? int(vector) : target.natural_vector_size<float>();
    k.tile_vectors = tile_vectors;
    k.tile_rows = tile_rows;
    return k;
  }

  CudaKnobs cuda_knobs() const {
    CudaKnobs k;
    k.chunk = chunk;
    k.threads = threads;
    k.tile = gpu_tile;
    k.large_tile = large_tile;
    return k;
  }

  // Every buffer's mins stated to be 0, as the runtime passes them (runtime/src/calls.cpp):
  // the CUDA kernels' indices into their stages are then known multiples of the aligned row
  // lengths, which their vector loads need (schedules/cuda.cpp, vector_tile_reduction).
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
