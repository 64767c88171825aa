// Generator `bla_forward`: the BLA forward pass (docs/spec.md §2). Algorithm in bla_forward.cpp,
// schedules in schedules/.
#include "baseline_shape.h"
#include "bla_forward.h"
#include "scan_generator_params.h"
#include "schedules/cpu.h"
#include "schedules/cuda.h"

using namespace Halide;

namespace fsattn {

class BlaForwardGenerator : public Generator<BlaForwardGenerator>, public ScanGeneratorParams {
 public:
  BlaForwardGenerator() : ScanGeneratorParams(64) {}

  Input<Buffer<float>> q{"q", 4};                    // [B,T,H,Dk] as (d, h, t, b)
  Input<Buffer<float>> k{"k", 4};                    // [B,T,H,Dk] as (d, h, t, b)
  Input<Buffer<float>> v{"v", 4};                    // [B,T,H,Dv] as (r, h, t, b)
  Input<Buffer<float>> log_gamma{"log_gamma", 1};    // [H] as (h)
  Input<Buffer<float>> state_k_in{"state_k_in", 4};  // [B,H,S,Dk] as (d, m, h, b)
  Input<Buffer<float>> state_v_in{"state_v_in", 4};  // [B,H,S,Dv] as (r, m, h, b)
  Input<double> phase{"phase"};                      // pos0 mod W, reduced exactly by the caller
  Input<double> period{"period"};                    // W
  Input<int> modes{"modes"};                         // M >= 0
  Input<int> slots{"slots"};                         // S >= 1
  Input<float> scale{"scale"};                       // > 0

  Output<Buffer<float>> o{"o", 4};                      // [B,T,H,Dv] as (r, h, t, b)
  Output<Buffer<float>> state_k_out{"state_k_out", 4};  // [B,H,S,Dk] as (d, m, h, b)
  Output<Buffer<float>> state_v_out{"state_v_out", 4};  // [B,H,S,Dv] as (r, m, h, b)

  // The benchmark shape: estimates for the autoschedulers, fixed sizes for the baselines.
  static constexpr int kB = baseline::kB, kT = baseline::kT, kH = baseline::kH, kD = baseline::kD,
                       kS = baseline::kFeatures, kM = baseline::kBlaModes;

  void generate() {
    Expr num_slots = slots;
    if (baseline) {
      for (Input<Buffer<float>> *x : {&q, &k, &v}) x->dim(0).set_bounds(0, kD).dim(1).set_bounds(0, kH);
      log_gamma.dim(0).set_bounds(0, kH);
      num_slots = kS;
    }
    // A NULL initial state arrives as a one-element zero buffer; repeat_edge reads it
    // everywhere. A real state has the full extent, so the clamp never moves an index.
    BlaForwardInputs in{q,
                        k,
                        v,
                        log_gamma,
                        BoundaryConditions::repeat_edge(state_k_in),
                        BoundaryConditions::repeat_edge(state_v_in),
                        phase,
                        period,
                        modes,
                        num_slots,
                        scale,
                        q.dim(0).extent(),
                        v.dim(0).extent(),
                        q.dim(2).extent()};
    stages = bla_forward_algorithm(in, chunk, masking(get_target()));
    o = stages.o;
    state_k_out = stages.state_k_out;
    state_v_out = stages.state_v_out;
  }

  void schedule() {
    const int B = kB, T = kT, H = kH, D = kD, S = kS;
    q.set_estimates({{0, D}, {0, H}, {0, T}, {0, B}});
    k.set_estimates({{0, D}, {0, H}, {0, T}, {0, B}});
    v.set_estimates({{0, D}, {0, H}, {0, T}, {0, B}});
    log_gamma.set_estimates({{0, H}});
    state_k_in.set_estimates({{0, D}, {0, S}, {0, H}, {0, B}});
    state_v_in.set_estimates({{0, D}, {0, S}, {0, H}, {0, B}});
    phase.set_estimate(0.0);
    period.set_estimate(256.0);
    modes.set_estimate(kM);
    slots.set_estimate(S);
    scale.set_estimate(0.125f);
    o.set_estimates({{0, D}, {0, H}, {0, T}, {0, B}});
    state_k_out.set_estimates({{0, D}, {0, S}, {0, H}, {0, B}});
    state_v_out.set_estimates({{0, D}, {0, S}, {0, H}, {0, B}});
    if (using_autoscheduler()) {
      narrow_autoscheduler_beam();
      return;
    }

    if (get_target().has_feature(Target::CUDA)) {
      mins_at_zero(q, k, v, log_gamma, state_k_in, state_v_in, o, state_k_out, state_v_out);
      schedule_bla_forward_cuda(stages, knobs(get_target()));
    } else {
      schedule_bla_forward_cpu(stages, knobs(get_target()));
    }
  }

 private:
  BlaForwardStages stages{ChunkGrid(Expr(0), 1)};
};

}  // namespace fsattn

HALIDE_REGISTER_GENERATOR(fsattn::BlaForwardGenerator, bla_forward)
