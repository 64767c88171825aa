// Generator `gradient_sum`: total + part, elementwise, over a flat float buffer. The runtime
// adds up the parameter gradients of the sequences of a variable-length backward pass on
// CUDA with it, in sequence order (runtime/src/varlen.h), on the call's stream. The output
// may be the memory of `total`. Schedule in schedules/.
#include "knob_params.h"
#include "schedules/cuda.h"

using namespace Halide;

namespace fsattn {

class GradientSumGenerator : public Generator<GradientSumGenerator>, public KnobParams {
 public:
  Input<Buffer<float>> total{"total", 1};  // the sum so far
  Input<Buffer<float>> part{"part", 1};    // the next sequence's gradient
  Output<Buffer<float>> sum{"sum", 1};

  void generate() {
    Var i("i");
    sum(i) = total(i) + part(i);
  }

  void schedule() {
    total.set_estimates({{0, 4096}});
    part.set_estimates({{0, 4096}});
    sum.set_estimates({{0, 4096}});
    schedule_gradient_sum_cuda(sum, knobs(get_target(), KnobScope::ALL));
  }
};

}  // namespace fsattn

HALIDE_REGISTER_GENERATOR(fsattn::GradientSumGenerator, gradient_sum)
