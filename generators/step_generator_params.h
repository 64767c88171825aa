// GeneratorParams shared by the two decoding-step generators: the schedules' knobs
// (schedules/knobs.h). A generator inherits this next to Halide::Generator<T>, as the scan
// generators inherit ScanGeneratorParams.
#pragma once

#include "Halide.h"
#include "schedules/knobs.h"

namespace fsattn {

class StepGeneratorParams {
 public:
  Halide::GeneratorParam<int> vector{"vector", 0};      // CPU: 0 = the target's natural width
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
    return k;
  }

  // Whether reads of the states go through clamps (the generators say which): only in the
  // per-state CUDA kernels, some of whose reads Halide bounds by whole tiles or lanes (the
  // fused kernel guards its loops, and Halide bounds its reads by the guards).
  bool clamps_state_reads(const Halide::Target &target) const {
    return target.has_feature(Halide::Target::CUDA) && !fused;
  }
};

}  // namespace fsattn
