// Generator `bla_backward`: the gradients of the BLA forward pass (docs/spec.md §2). Algorithm in
// bla_backward.cpp, schedules in schedules/.
#include "baseline_shape.h"
#include "bla_backward.h"
#include "scan_generator_params.h"
#include "schedules/cpu.h"
#include "schedules/cuda.h"

using namespace Halide;

namespace fsattn {

class BlaBackwardGenerator : public Generator<BlaBackwardGenerator>, public ScanGeneratorParams {
 public:
  BlaBackwardGenerator() : ScanGeneratorParams(64) {}

  Input<Buffer<float>> q{"q", 4};                          // [B,T,H,Dk] as (d, h, t, b)
  Input<Buffer<float>> k{"k", 4};                          // [B,T,H,Dk] as (d, h, t, b)
  Input<Buffer<float>> v{"v", 4};                          // [B,T,H,Dv] as (r, h, t, b)
  Input<Buffer<float>> log_gamma{"log_gamma", 1};          // [H] as (h)
  Input<Buffer<float>> state_k_in{"state_k_in", 4};        // [B,H,S,Dk] as (d, m, h, b)
  Input<Buffer<float>> state_v_in{"state_v_in", 4};        // [B,H,S,Dv] as (r, m, h, b)
  Input<Buffer<float>> d_o{"d_o", 4};                      // [B,T,H,Dv] as (r, h, t, b)
  Input<Buffer<float>> d_state_k_out{"d_state_k_out", 4};  // [B,H,S,Dk]
  Input<Buffer<float>> d_state_v_out{"d_state_v_out", 4};  // [B,H,S,Dv]
  Input<double> phase{"phase"};                            // pos0 mod W, reduced exactly by the caller
  Input<double> period{"period"};                          // W
  Input<int> modes{"modes"};                               // M >= 0
  Input<int> slots{"slots"};                               // S >= 1
  Input<float> scale{"scale"};                             // > 0

  Output<Buffer<float>> dq{"dq", 4};                      // [B,T,H,Dk] as (d, h, t, b)
  Output<Buffer<float>> dk{"dk", 4};                      // [B,T,H,Dk] as (d, h, t, b)
  Output<Buffer<float>> dv{"dv", 4};                      // [B,T,H,Dv] as (r, h, t, b)
  Output<Buffer<float>> d_log_gamma{"d_log_gamma", 1};    // [H] as (h), summed over the batch
  Output<Buffer<float>> d_state_k_in{"d_state_k_in", 4};  // [B,H,S,Dk] as (d, m, h, b)
  Output<Buffer<float>> d_state_v_in{"d_state_v_in", 4};  // [B,H,S,Dv] as (r, m, h, b)

  // The benchmark shape: estimates for the autoschedulers, fixed sizes for the baselines.
  static constexpr int kB = baseline::kB, kT = baseline::kT, kH = baseline::kH, kD = baseline::kD,
                       kS = baseline::kFeatures, kM = baseline::kBlaModes;

  void generate() {
    Expr num_slots = slots;
    if (baseline) {
      for (Input<Buffer<float>> *x : {&q, &k, &v, &d_o}) x->dim(0).set_bounds(0, kD).dim(1).set_bounds(0, kH);
      log_gamma.dim(0).set_bounds(0, kH);
      num_slots = kS;
    }
    // NULL states and state gradients arrive as one-element zero buffers (see bla_forward).
    BlaForwardInputs fwd{q,
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
    BlaBackwardInputs in{fwd, d_o, BoundaryConditions::repeat_edge(d_state_k_out),
                         BoundaryConditions::repeat_edge(d_state_v_out)};
    stages = bla_backward_algorithm(in, chunk, masking(get_target()));
    dq = stages.dq;
    dk = stages.dk;
    dv = stages.dv;
    sums = {batch_sum(stages.d_log_gamma, q.dim(3).extent(), "d_log_gamma_sum")};
    d_log_gamma = sums[0];
    d_state_k_in = stages.d_state_k_in;
    d_state_v_in = stages.d_state_v_in;
  }

  void schedule() {
    const int B = kB, T = kT, H = kH, D = kD, S = kS;
    for (Input<Buffer<float>> *x : {&q, &k, &v, &d_o}) x->set_estimates({{0, D}, {0, H}, {0, T}, {0, B}});
    for (Input<Buffer<float>> *x : {&state_k_in, &state_v_in, &d_state_k_out, &d_state_v_out}) {
      x->set_estimates({{0, D}, {0, S}, {0, H}, {0, B}});
    }
    log_gamma.set_estimates({{0, H}});
    phase.set_estimate(0.0);
    period.set_estimate(256.0);
    modes.set_estimate(kM);
    slots.set_estimate(S);
    scale.set_estimate(0.125f);
    for (Output<Buffer<float>> *x : {&dq, &dk, &dv}) x->set_estimates({{0, D}, {0, H}, {0, T}, {0, B}});
    d_log_gamma.set_estimates({{0, H}});
    d_state_k_in.set_estimates({{0, D}, {0, S}, {0, H}, {0, B}});
    d_state_v_in.set_estimates({{0, D}, {0, S}, {0, H}, {0, B}});
    if (using_autoscheduler()) {
      narrow_autoscheduler_beam();
      return;
    }
    if (get_target().has_feature(Target::CUDA)) {
      mins_at_zero(q, k, v, log_gamma, state_k_in, state_v_in, d_o, d_state_k_out, d_state_v_out, dq, dk, dv,
                   d_log_gamma, d_state_k_in, d_state_v_in);
      schedule_bla_backward_cuda(stages, sums, knobs(get_target()));
    } else {
      schedule_bla_backward_cpu(stages, knobs(get_target()));
    }
  }

 private:
  std::vector<Func> sums;  // the parameter gradients, summed over the batch
  BlaBackwardStages stages{BlaForwardStages{ChunkGrid(Expr(0), 1)}};
};

}  // namespace fsattn

HALIDE_REGISTER_GENERATOR(fsattn::BlaBackwardGenerator, bla_backward)
