// The host's own pipeline: out(x) = 2 in(x).
#include <Halide.h>

class ScaleByTwo : public Halide::Generator<ScaleByTwo> {
 public:
  Input<Buffer<float, 1>> in{"in"};
  Output<Buffer<float, 1>> out{"out"};
  void generate() {
    Halide::Var x;
    out(x) = 2.0f * in(x);
  }
};
HALIDE_REGISTER_GENERATOR(ScaleByTwo, scale_by_two)
