// Generator `ida_backward`: the gradients of the IDA forward pass (docs/spec.md §1). Algorithm in
// ida_backward.cpp, schedules in schedules/.
#include "baseline_shape.h"
#include "ida_backward.h"
#include "scan_generator_params.h"
#include "schedules/cpu.h"
#include "schedules/cuda.h"

using namespace Halide;

namespace fsattn {

class IdaBackwardGenerator : public Generator<IdaBackwardGenerator>, public ScanGeneratorParams {
 public:
  IdaBackwardGenerator() : ScanGeneratorParams(64) {}

  Input<Buffer<float>> q{"q", 4};                          // [B,T,H,Dk] as (d, h, t, b)
  Input<Buffer<float>> k{"k", 4};                          // [B,T,H,Dk] as (d, h, t, b)
  Input<Buffer<float>> v{"v", 4};                          // [B,T,H,Dv] as (r, h, t, b)
  Input<Buffer<float>> gk{"gk", 2};                        // [H,Dk] as (d, h)
  Input<Buffer<float>> bk{"bk", 2};                        // [H,Dk] as (d, h)
  Input<Buffer<float>> gv{"gv", 2};                        // [H,Dv] as (r, h)
  Input<Buffer<float>> bv{"bv", 2};                        // [H,Dv] as (r, h)
  Input<Buffer<float>> log_dt{"log_dt", 1};                // [H] as (h)
  Input<Buffer<float>> a_re_log{"a_re_log", 2};            // [H,M] as (m, h)
  Input<Buffer<float>> a_im{"a_im", 2};                    // [H,M] as (m, h)
  Input<Buffer<float>> b_mode{"b_mode", 3};                // [H,M,2] as (ri, m, h)
  Input<Buffer<float>> c_mix{"c_mix", 4};                  // [H,M,M,2] as (ri, col, row, h)
  Input<Buffer<float>> state_k_in{"state_k_in", 5};        // [B,H,M,Dk,2] as (ri, d, m, h, b)
  Input<Buffer<float>> state_v_in{"state_v_in", 5};        // [B,H,M,Dv,2] as (ri, r, m, h, b)
  Input<Buffer<float>> d_o{"d_o", 4};                      // [B,T,H,Dv] as (r, h, t, b)
  Input<Buffer<float>> d_state_k_out{"d_state_k_out", 5};  // [B,H,M,Dk,2]
  Input<Buffer<float>> d_state_v_out{"d_state_v_out", 5};  // [B,H,M,Dv,2]
  Input<float> eps{"eps"};

  Output<Buffer<float>> dq{"dq", 4};  // [B,T,H,Dk] as (d, h, t, b)
  Output<Buffer<float>> dk{"dk", 4};  // [B,T,H,Dk] as (d, h, t, b)
  Output<Buffer<float>> dv{"dv", 4};  // [B,T,H,Dv] as (r, h, t, b)
  // The parameters' gradients, summed over the batch, in the parameters' layouts.
  Output<Buffer<float>> d_gk{"d_gk", 2};                  // (d, h)
  Output<Buffer<float>> d_bk{"d_bk", 2};                  // (d, h)
  Output<Buffer<float>> d_gv{"d_gv", 2};                  // (r, h)
  Output<Buffer<float>> d_bv{"d_bv", 2};                  // (r, h)
  Output<Buffer<float>> d_log_dt{"d_log_dt", 1};          // (h)
  Output<Buffer<float>> d_a_re_log{"d_a_re_log", 2};      // (m, h)
  Output<Buffer<float>> d_a_im{"d_a_im", 2};              // (m, h)
  Output<Buffer<float>> d_b_mode{"d_b_mode", 3};          // (ri, m, h)
  Output<Buffer<float>> d_c_mix{"d_c_mix", 4};            // (ri, col, row, h)
  Output<Buffer<float>> d_state_k_in{"d_state_k_in", 5};  // [B,H,M,Dk,2] as (ri, d, m, h, b)
  Output<Buffer<float>> d_state_v_in{"d_state_v_in", 5};  // [B,H,M,Dv,2] as (ri, r, m, h, b)

  // The benchmark shape: estimates for the autoschedulers, fixed sizes for the baselines.
  static constexpr int kB = baseline::kB, kT = baseline::kT, kH = baseline::kH, kD = baseline::kD,
                       kM = baseline::kFeatures;

  void generate() {
    if (baseline) {
      for (Input<Buffer<float>> *x : {&q, &k, &v, &d_o, &gk, &bk, &gv, &bv}) {
        x->dim(0).set_bounds(0, kD);
        x->dim(1).set_bounds(0, kH);
      }
      log_dt.dim(0).set_bounds(0, kH);
      for (Input<Buffer<float>> *x : {&a_re_log, &a_im}) x->dim(0).set_bounds(0, kM).dim(1).set_bounds(0, kH);
      b_mode.dim(1).set_bounds(0, kM).dim(2).set_bounds(0, kH);
      c_mix.dim(1).set_bounds(0, kM).dim(2).set_bounds(0, kM).dim(3).set_bounds(0, kH);
    }
    // NULL states and state gradients arrive as one-element zero buffers (see ida_forward).
    // CUDA register tiles may run past the true channel and mode counts (schedules/cuda/):
    // there the parameters are read through clamped indices.
    const bool clamp = get_target().has_feature(Target::CUDA);
    auto param = [&](Input<Buffer<float>> &p) { return clamp ? BoundaryConditions::repeat_edge(p) : Func(p); };
    IdaForwardInputs fwd{q,
                         k,
                         v,
                         param(gk),
                         param(bk),
                         param(gv),
                         param(bv),
                         param(log_dt),
                         param(a_re_log),
                         param(a_im),
                         param(b_mode),
                         param(c_mix),
                         BoundaryConditions::repeat_edge(state_k_in),
                         BoundaryConditions::repeat_edge(state_v_in),
                         eps,
                         q.dim(0).extent(),
                         v.dim(0).extent(),
                         a_im.dim(0).extent(),
                         q.dim(2).extent()};
    IdaBackwardInputs in{fwd, d_o, BoundaryConditions::repeat_edge(d_state_k_out),
                         BoundaryConditions::repeat_edge(d_state_v_out)};
    stages = ida_backward_algorithm(in, chunk, masking(get_target()));
    dq = stages.dq;
    dk = stages.dk;
    dv = stages.dv;
    const Expr batches = q.dim(3).extent();
    sums = {
        batch_sum(stages.d_gk, batches, "d_gk_sum"),         batch_sum(stages.d_bk, batches, "d_bk_sum"),
        batch_sum(stages.d_gv, batches, "d_gv_sum"),         batch_sum(stages.d_bv, batches, "d_bv_sum"),
        batch_sum(stages.d_log_dt, batches, "d_log_dt_sum"), batch_sum(stages.d_a_re_log, batches, "d_a_re_log_sum"),
        batch_sum(stages.d_a_im, batches, "d_a_im_sum"),     batch_sum(stages.d_b_mode, batches, "d_b_mode_sum"),
        batch_sum(stages.d_c_mix, batches, "d_c_mix_sum")};
    d_gk = sums[0];
    d_bk = sums[1];
    d_gv = sums[2];
    d_bv = sums[3];
    d_log_dt = sums[4];
    d_a_re_log = sums[5];
    d_a_im = sums[6];
    d_b_mode = sums[7];
    d_c_mix = sums[8];
    d_state_k_in = stages.d_state_k_in;
    d_state_v_in = stages.d_state_v_in;
  }

  void schedule() {
    const int B = kB, T = kT, H = kH, D = kD, M = kM;
    for (auto *x : {&q, &k, &v, &d_o}) x->set_estimates({{0, D}, {0, H}, {0, T}, {0, B}});
    for (auto *p : {&gk, &bk, &gv, &bv}) p->set_estimates({{0, D}, {0, H}});
    log_dt.set_estimates({{0, H}});
    a_re_log.set_estimates({{0, M}, {0, H}});
    a_im.set_estimates({{0, M}, {0, H}});
    b_mode.set_estimates({{0, 2}, {0, M}, {0, H}});
    c_mix.set_estimates({{0, 2}, {0, M}, {0, M}, {0, H}});
    for (auto *x : {&state_k_in, &state_v_in, &d_state_k_out, &d_state_v_out}) {
      x->set_estimates({{0, 2}, {0, D}, {0, M}, {0, H}, {0, B}});
    }
    eps.set_estimate(1e-6f);
    for (auto *x : {&dq, &dk, &dv}) x->set_estimates({{0, D}, {0, H}, {0, T}, {0, B}});
    for (auto *x : {&d_gk, &d_bk, &d_gv, &d_bv}) x->set_estimates({{0, D}, {0, H}});
    d_log_dt.set_estimates({{0, H}});
    d_a_re_log.set_estimates({{0, M}, {0, H}});
    d_a_im.set_estimates({{0, M}, {0, H}});
    d_b_mode.set_estimates({{0, 2}, {0, M}, {0, H}});
    d_c_mix.set_estimates({{0, 2}, {0, M}, {0, M}, {0, H}});
    d_state_k_in.set_estimates({{0, 2}, {0, D}, {0, M}, {0, H}, {0, B}});
    d_state_v_in.set_estimates({{0, 2}, {0, D}, {0, M}, {0, H}, {0, B}});
    if (using_autoscheduler()) {
      narrow_autoscheduler_beam();
      return;
    }
    if (get_target().has_feature(Target::CUDA)) {
      mins_at_zero(q, k, v, gk, bk, gv, bv, log_dt, a_re_log, a_im, b_mode, c_mix, state_k_in, state_v_in, d_o,
                   d_state_k_out, d_state_v_out, dq, dk, dv, d_gk, d_bk, d_gv, d_bv, d_log_dt, d_a_re_log, d_a_im,
                   d_b_mode, d_c_mix, d_state_k_in, d_state_v_in);
      schedule_ida_backward_cuda(stages, sums, knobs(get_target()));
    } else {
      schedule_ida_backward_cpu(stages, knobs(get_target()));
    }
  }

 private:
  std::vector<Func> sums;  // the parameter gradients, summed over the batch
  IdaBackwardStages stages{IdaForwardStages{ChunkGrid(Expr(0), 1)}};
};

}  // namespace fsattn

HALIDE_REGISTER_GENERATOR(fsattn::IdaBackwardGenerator, ida_backward)
