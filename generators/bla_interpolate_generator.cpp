// Generator `bla_interpolate`: the blurry key or value window reconstructed from a BLA slot
// state by Dirichlet interpolation (dirichlet.h). Schedules in schedules/.
#include "dirichlet.h"
#include "knob_params.h"
#include "schedules/cpu.h"
#include "schedules/cuda.h"

using namespace Halide;

namespace fsattn {

class BlaInterpolateGenerator : public Generator<BlaInterpolateGenerator>, public KnobParams {
 public:
  Input<Buffer<float>> state{"state", 4};  // [B,H,S,D] as (r, m, h, b)
  Input<Buffer<double>> lags{"lags", 1};   // [N] as (n): lag 0 is the newest token
  Input<double> phase{"phase"};            // position of the newest token mod W
  Input<double> period{"period"};          // W
  Input<int> modes{"modes"};               // M >= 0

  Output<Buffer<float>> out{"out", 4};  // [B,H,N,D] as (r, n, h, b)

  void generate() {
    stages = dirichlet_interpolation(state, lags, phase, modes, period, state.dim(1).extent());
    out = stages.out;
  }

  void schedule() {
    const int B = 2, H = 4, D = 64, S = 64, N = 256;
    state.set_estimates({{0, D}, {0, S}, {0, H}, {0, B}});
    lags.set_estimates({{0, N}});
    phase.set_estimate(0.0);
    period.set_estimate(256.0);
    modes.set_estimate(31);
    out.set_estimates({{0, D}, {0, N}, {0, H}, {0, B}});
    if (using_autoscheduler()) return;
    if (get_target().has_feature(Target::CUDA)) {
      schedule_bla_interpolate_cuda(stages, knobs(get_target(), KnobScope::ALL));
      return;
    }
    schedule_bla_interpolate_cpu(stages, knobs(get_target(), KnobScope::ALL));
  }

 private:
  DirichletInterpolation stages;
};

}  // namespace fsattn

HALIDE_REGISTER_GENERATOR(fsattn::BlaInterpolateGenerator, bla_interpolate)
