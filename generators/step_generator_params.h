// GeneratorParams shared by the two decoding-step generators: the schedule knobs of scope
// STEP (knob_params.h). A generator inherits this next to Halide::Generator<T>, as the scan
// generators inherit ScanGeneratorParams.
#pragma once

#include "Halide.h"
#include "knob_params.h"

namespace fsattn {

class StepGeneratorParams : public KnobParams {
 public:
  Knobs knobs(const Halide::Target &target) const { return KnobParams::knobs(target, KnobScope::STEP); }

  // Whether reads of the states go through clamps (the generators say which): only in the
  // per-state CUDA kernels, some of whose reads Halide bounds by whole tiles or lanes (the
  // fused kernel guards its loops, and Halide bounds its reads by the guards).
  bool clamps_state_reads(const Halide::Target &target) const {
    return target.has_feature(Halide::Target::CUDA) && !fused;
  }
};

}  // namespace fsattn
