// GeneratorParams shared by the two decoding-step generators: the schedules' knobs
// (schedules/knobs.h). A generator inherits this next to Halide::Generator<T>, as the scan
// generators inherit ScanGeneratorParams.
#pragma once

#include "Halide.h"
#include "schedules/knobs.h"

namespace fsattn {

class StepGeneratorParams {
 public:
  // CPU: the vector width in floats, 0 = the target's natural width. CUDA, fused: 4 = the
  // states (and BLA's q, k, v) read and the states written 4 floats at a time, as 128-bit
  // loads and stores, which need vector_rows; 0 = a float at a time.
  Halide::GeneratorParam<int> vector{"vector", 0};
  Halide::GeneratorParam<int> threads{"threads", 128};  // CUDA threads per block
  Halide::GeneratorParam<int> fused{"fused", 0};        // CUDA: 1 = the whole step one kernel
  Halide::GeneratorParam<int> unroll{"unroll", 8};      // CUDA, fused: unrolling of the state loops

  CpuKnobs cpu_knobs(const Halide::Target &target) const {
    CpuKnobs k;
    k.vector = vector > 0 ? int(vector) : target.natural_vector_size<float>();
    return k;
  }

  CudaKnobs cuda_knobs() const {
    CudaKnobs k;
    k.threads = threads;
    k.fused = fused;
    k.unroll = unroll;
    k.vector = fused ? int(vector) : 0;
    return k;
  }

  // Whether the schedule reads and writes vectors of 4 floats: CUDA, fused, vector 4.
  bool vectors(const Halide::Target &target) const {
    return target.has_feature(Halide::Target::CUDA) && fused && vector == 4;
  }

  static Halide::Expr multiple_of_4(const Halide::Expr &e) { return (e / 4) * 4; }

  // For CUDA variants with vector 4: the buffer's rows stated to be multiples of 4 floats, so
  // that Halide 14 can prove the alignment of 128-bit loads and stores along them (it emits
  // them only where it can). Its mins are 0, every stride but the innermost's is a multiple of
  // 4 and an interleaved buffer's (whose first dimension is a complex value's (re, im))
  // channel stride, its second's, is 2. An input's channel extent (its first dimension's, the
  // second's where interleaved) is a multiple of 4 (the outputs' are stated equal to the
  // inputs'). Halide checks these at each call; the runtime picks such a variant only for
  // calls that meet them with 16-byte-aligned pointers (runtime/src/kernels.h: fit_vector_rows).
  template <typename Buffer>
  void vector_rows(const Halide::Target &target, Buffer &b, bool interleaved, bool input) const {
    if (!vectors(target)) return;
    const int channel = interleaved ? 1 : 0;
    for (int d = 0; d < b.dimensions(); ++d) b.dim(d).set_min(0);
    if (input) b.dim(channel).set_extent(multiple_of_4(b.dim(channel).extent()));
    if (interleaved) b.dim(1).set_stride(2);
    for (int d = channel + 1; d < b.dimensions(); ++d) b.dim(d).set_stride(multiple_of_4(b.dim(d).stride()));
  }

  // A channel count as vector_rows states it, (n / 4) * 4 where vector 4, n elsewhere: the
  // reductions' extents written so, Halide 14 proves that their vectors of 4 are whole, and
  // guards each vector by one test, not one per lane (a test per lane made masked loads).
  Halide::Expr channels(const Halide::Target &target, const Halide::Expr &n) const {
    return vectors(target) ? multiple_of_4(n) : n;
  }

  // Whether the value state's reads by channel go through a clamp: only in the per-state CUDA
  // kernels, whose value kernel runs over channels in whole tiles (the fused kernel guards its
  // loops, and Halide bounds its reads by the guards).
  bool clamps_value_reads(const Halide::Target &target) const {
    return target.has_feature(Halide::Target::CUDA) && !fused;
  }
};

}  // namespace fsattn
