// Generator `ida_step`: one IDA decoding step (docs/spec.md §5). Algorithm in step.cpp, schedules
// in schedules/.
#include "schedules/cpu.h"
#include "schedules/cuda.h"
#include "step.h"
#include "step_generator_params.h"

using namespace Halide;

namespace fsattn {

class IdaStepGenerator : public Generator<IdaStepGenerator>, public StepGeneratorParams {
 public:
  Input<Buffer<float>> q{"q", 4};                // [B,1,H,Dk] as (d, h, t, b)
  Input<Buffer<float>> k{"k", 4};                // [B,1,H,Dk] as (d, h, t, b)
  Input<Buffer<float>> v{"v", 4};                // [B,1,H,Dv] as (r, h, t, b)
  Input<Buffer<float>> gk{"gk", 2};              // [H,Dk] as (d, h)
  Input<Buffer<float>> bk{"bk", 2};              // [H,Dk] as (d, h)
  Input<Buffer<float>> gv{"gv", 2};              // [H,Dv] as (r, h)
  Input<Buffer<float>> bv{"bv", 2};              // [H,Dv] as (r, h)
  Input<Buffer<float>> log_dt{"log_dt", 1};      // [H] as (h)
  Input<Buffer<float>> a_re_log{"a_re_log", 2};  // [H,M] as (m, h)
  Input<Buffer<float>> a_im{"a_im", 2};          // [H,M] as (m, h)
  Input<Buffer<float>> b_mode{"b_mode", 3};      // [H,M,2] as (ri, m, h)
  Input<Buffer<float>> c_mix{"c_mix", 4};        // [H,M,M,2] as (ri, col, row, h)
  Input<Buffer<float>> state_k{"state_k", 5};    // [B,H,M,Dk,2] as (ri, d, m, h, b)
  Input<Buffer<float>> state_v{"state_v", 5};    // [B,H,M,Dv,2] as (ri, r, m, h, b)
  Input<float> eps{"eps"};

  Output<Buffer<float>> o{"o", 4};                      // [B,1,H,Dv] as (r, h, t, b)
  Output<Buffer<float>> state_k_out{"state_k_out", 5};  // may be the memory of state_k
  Output<Buffer<float>> state_v_out{"state_v_out", 5};  // may be the memory of state_v

  void generate() {
    // On CUDA (the per-state kernels) Halide 14 bounds some reads of the old states by whole
    // tiles or lanes, not by their guards (schedules/cuda/): the value state's kernel runs
    // over channels in whole tiles, and reads the state through a clamp on the channel (each
    // thread's own, formed once per thread; the values past Dv reach no output); the key
    // state's read copies each (re, im) pair at its partial sums' loop, and reads through a
    // clamp on the channel and the mode. Every other read is bounded by the true sizes, and
    // is not clamped: a clamp in a loop costs a min, a max and a 64-bit index per load (see
    // bla_step).
    const bool clamp = clamps_state_reads(get_target());
    IdaStepInputs in{q,
                     k,
                     v,
                     gk,
                     bk,
                     gv,
                     bv,
                     log_dt,
                     a_re_log,
                     a_im,
                     b_mode,
                     c_mix,
                     clamped_view(state_k, {1, 2}, clamp),
                     clamped_view(state_v, {1}, clamp),
                     eps,
                     q.dim(0).extent(),
                     v.dim(0).extent(),
                     a_im.dim(0).extent()};
    stages = ida_step_algorithm(in);
    o = stages.o;
    state_k_out = stages.state_k_out;
    state_v_out = stages.state_v_out;
    // The outputs' shapes, stated (the runtime passes exactly these). Unstated, the CUDA
    // schedule's fused kernels (schedules/cuda/) guard each fused stage by its own range
    // of heads and sequences, and Halide 14 fails to split those guarded loops.
    const Expr B = q.dim(3).extent(), H = q.dim(1).extent(), M = a_im.dim(0).extent();
    o.dim(0).set_bounds(0, in.dv).dim(1).set_bounds(0, H).dim(2).set_bounds(0, 1).dim(3).set_bounds(0, B);
    for (auto [out, channels] : {std::pair(&state_k_out, in.dk), std::pair(&state_v_out, in.dv)}) {
      out->dim(0).set_bounds(0, 2).dim(1).set_bounds(0, channels).dim(2).set_bounds(0, M);
      out->dim(3).set_bounds(0, H).dim(4).set_bounds(0, B);
    }
    // On CUDA each (re, im) pair of a state is loaded and stored as one 8-byte vector
    // (schedules/cuda/), which needs the pairs known to be 8-byte aligned: the states'
    // strides stated (dense, as the runtime passes them) and their memory 8-byte aligned (the
    // runtime refuses states that are not). (With two 4-byte loads, 46% of the key kernel's
    // sectors were excess: each load spans twice the sectors it uses.)
    if (get_target().has_feature(Target::CUDA)) {
      for (auto [in_state, out_state, channels] :
           {std::tuple(&state_k, &state_k_out, in.dk), std::tuple(&state_v, &state_v_out, in.dv)}) {
        in_state->set_host_alignment(8);
        out_state->set_host_alignment(8);
        const Expr strides[] = {1, 2, 2 * channels, 2 * channels * M, 2 * channels * M * H};
        for (int d = 0; d < 5; ++d) {
          in_state->dim(d).set_stride(strides[d]);
          out_state->dim(d).set_stride(strides[d]);
        }
        in_state->dim(0).set_bounds(0, 2);
        for (int d = 1; d < 5; ++d) in_state->dim(d).set_min(0);
      }
    }
  }

  void schedule() {
    if (get_target().has_feature(Target::CUDA)) {
      schedule_ida_step_cuda(stages, knobs(get_target()));
      return;
    }
    schedule_ida_step_cpu(stages, knobs(get_target()));
  }

 private:
  IdaStepStages stages{ChunkGrid(Expr(1), 1)};
};

}  // namespace fsattn

HALIDE_REGISTER_GENERATOR(fsattn::IdaStepGenerator, ida_step)
