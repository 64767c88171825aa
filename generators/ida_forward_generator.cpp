// Generator `ida_forward`: the IDA forward pass (docs/spec.md §1). Algorithm in ida_forward.cpp,
// schedules in schedules/.
#include "baseline_shape.h"
#include "ida_forward.h"
#include "scan_generator_params.h"
#include "schedules/cpu.h"
#include "schedules/cuda.h"

using namespace Halide;

namespace fsattn {

class IdaForwardGenerator : public Generator<IdaForwardGenerator>, public ScanGeneratorParams {
 public:
  IdaForwardGenerator() : ScanGeneratorParams(32) {}

  Input<Buffer<float>> q{"q", 4};                    // [B,T,H,Dk] as (d, h, t, b)
  Input<Buffer<float>> k{"k", 4};                    // [B,T,H,Dk] as (d, h, t, b)
  Input<Buffer<float>> v{"v", 4};                    // [B,T,H,Dv] as (r, h, t, b)
  Input<Buffer<float>> gk{"gk", 2};                  // [H,Dk] as (d, h)
  Input<Buffer<float>> bk{"bk", 2};                  // [H,Dk] as (d, h)
  Input<Buffer<float>> gv{"gv", 2};                  // [H,Dv] as (r, h)
  Input<Buffer<float>> bv{"bv", 2};                  // [H,Dv] as (r, h)
  Input<Buffer<float>> log_dt{"log_dt", 1};          // [H] as (h)
  Input<Buffer<float>> a_re_log{"a_re_log", 2};      // [H,M] as (m, h)
  Input<Buffer<float>> a_im{"a_im", 2};              // [H,M] as (m, h)
  Input<Buffer<float>> b_mode{"b_mode", 3};          // [H,M,2] as (ri, m, h)
  Input<Buffer<float>> c_mix{"c_mix", 4};            // [H,M,M,2] as (ri, col, row, h)
  Input<Buffer<float>> state_k_in{"state_k_in", 5};  // [B,H,M,Dk,2] as (ri, d, m, h, b)
  Input<Buffer<float>> state_v_in{"state_v_in", 5};  // [B,H,M,Dv,2] as (ri, r, m, h, b)
  Input<float> eps{"eps"};

  Output<Buffer<float>> o{"o", 4};                      // [B,T,H,Dv] as (r, h, t, b)
  Output<Buffer<float>> state_k_out{"state_k_out", 5};  // [B,H,M,Dk,2] as (ri, d, m, h, b)
  Output<Buffer<float>> state_v_out{"state_v_out", 5};  // [B,H,M,Dv,2] as (ri, r, m, h, b)

  // The benchmark shape: estimates for the autoschedulers, fixed sizes for the baselines.
  static constexpr int kB = baseline::kB, kT = baseline::kT, kH = baseline::kH, kD = baseline::kD,
                       kM = baseline::kFeatures;

  void generate() {
    if (baseline) {
      for (Input<Buffer<float>> *x : {&q, &k, &v, &gk, &bk, &gv, &bv}) {
        x->dim(0).set_bounds(0, kD);
        x->dim(1).set_bounds(0, kH);
      }
      log_dt.dim(0).set_bounds(0, kH);
      for (Input<Buffer<float>> *x : {&a_re_log, &a_im}) x->dim(0).set_bounds(0, kM).dim(1).set_bounds(0, kH);
      b_mode.dim(1).set_bounds(0, kM).dim(2).set_bounds(0, kH);
      c_mix.dim(1).set_bounds(0, kM).dim(2).set_bounds(0, kM).dim(3).set_bounds(0, kH);
    }
    // A NULL initial state arrives as a one-element zero buffer; repeat_edge reads it
    // everywhere. A real state has the full extent, so the clamp never moves an index.
    // CUDA register tiles may run past the true channel and mode counts (schedules/cuda/):
    // there the parameters are read through clamped indices.
    const bool clamp = get_target().has_feature(Target::CUDA);
    auto param = [&](Input<Buffer<float>> &p) { return clamp ? BoundaryConditions::repeat_edge(p) : Func(p); };
    IdaForwardInputs in{q,
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
    stages = ida_forward_algorithm(in, chunk, masking(get_target()));
    o = stages.o;
    state_k_out = stages.state_k_out;
    state_v_out = stages.state_v_out;
  }

  void schedule() {
    const int B = kB, T = kT, H = kH, D = kD, M = kM;
    q.set_estimates({{0, D}, {0, H}, {0, T}, {0, B}});
    k.set_estimates({{0, D}, {0, H}, {0, T}, {0, B}});
    v.set_estimates({{0, D}, {0, H}, {0, T}, {0, B}});
    for (auto *p : {&gk, &bk, &gv, &bv}) p->set_estimates({{0, D}, {0, H}});
    log_dt.set_estimates({{0, H}});
    a_re_log.set_estimates({{0, M}, {0, H}});
    a_im.set_estimates({{0, M}, {0, H}});
    b_mode.set_estimates({{0, 2}, {0, M}, {0, H}});
    c_mix.set_estimates({{0, 2}, {0, M}, {0, M}, {0, H}});
    state_k_in.set_estimates({{0, 2}, {0, D}, {0, M}, {0, H}, {0, B}});
    state_v_in.set_estimates({{0, 2}, {0, D}, {0, M}, {0, H}, {0, B}});
    eps.set_estimate(1e-6f);
    o.set_estimates({{0, D}, {0, H}, {0, T}, {0, B}});
    state_k_out.set_estimates({{0, 2}, {0, D}, {0, M}, {0, H}, {0, B}});
    state_v_out.set_estimates({{0, 2}, {0, D}, {0, M}, {0, H}, {0, B}});
    if (using_autoscheduler()) {
      narrow_autoscheduler_beam();
      return;
    }

    if (get_target().has_feature(Target::CUDA)) {
      mins_at_zero(q, k, v, gk, bk, gv, bv, log_dt, a_re_log, a_im, b_mode, c_mix, state_k_in, state_v_in, o,
                   state_k_out, state_v_out);
      schedule_ida_forward_cuda(stages, knobs(get_target()));
    } else {
      schedule_ida_forward_cpu(stages, knobs(get_target()));
    }
  }

 private:
  IdaForwardStages stages{ChunkGrid(Expr(0), 1)};
};

}  // namespace fsattn

HALIDE_REGISTER_GENERATOR(fsattn::IdaForwardGenerator, ida_forward)
