// Generator `bla_step`: one BLA decoding step (docs/spec.md §5). Algorithm in step.cpp, schedules
// in schedules/.
#include "schedules/cpu.h"
#include "schedules/cuda.h"
#include "step.h"
#include "step_generator_params.h"

using namespace Halide;

namespace fsattn {

class BlaStepGenerator : public Generator<BlaStepGenerator>, public StepGeneratorParams {
 public:
  Input<Buffer<float>> q{"q", 4};                  // [B,1,H,Dk] as (d, h, t, b)
  Input<Buffer<float>> k{"k", 4};                  // [B,1,H,Dk] as (d, h, t, b)
  Input<Buffer<float>> v{"v", 4};                  // [B,1,H,Dv] as (r, h, t, b)
  Input<Buffer<float>> log_gamma{"log_gamma", 1};  // [H] as (h)
  Input<Buffer<float>> state_k{"state_k", 4};      // [B,H,S,Dk] as (d, m, h, b)
  Input<Buffer<float>> state_v{"state_v", 4};      // [B,H,S,Dv] as (r, m, h, b)
  Input<double> phase{"phase"};                    // the token's position mod W, reduced exactly by the caller
  Input<double> period{"period"};                  // W
  Input<int> modes{"modes"};                       // M >= 0
  Input<int> slots{"slots"};                       // S >= 1
  Input<float> scale{"scale"};                     // > 0

  Output<Buffer<float>> o{"o", 4};                      // [B,1,H,Dv] as (r, h, t, b)
  Output<Buffer<float>> state_k_out{"state_k_out", 4};  // may be the memory of state_k
  Output<Buffer<float>> state_v_out{"state_v_out", 4};  // may be the memory of state_v

  void generate() {
    // On CUDA the value state's kernel reads v and the old state by channel in whole tiles:
    // they are read through a clamp on the channel, see ida_step. (Reading the key state
    // through clamps on channel and slot, as every read once was, the key state's kernel ran
    // about 220 instructions for 8 channels, where it now runs about 60.)
    const bool clamp = clamps_state_reads(get_target());
    BlaStepInputs in{q,
                     k,
                     clamped_view(v, {0}, clamp),
                     log_gamma,
                     state_k,
                     clamped_view(state_v, {0}, clamp),
                     phase,
                     period,
                     modes,
                     slots,
                     scale,
                     q.dim(0).extent(),
                     v.dim(0).extent()};
    stages = bla_step_algorithm(in);
    o = stages.o;
    state_k_out = stages.state_k_out;
    state_v_out = stages.state_v_out;
    // The outputs' shapes, stated (the runtime passes exactly these): see ida_step.
    const Expr B = q.dim(3).extent(), H = q.dim(1).extent();
    o.dim(0).set_bounds(0, in.dv).dim(1).set_bounds(0, H).dim(2).set_bounds(0, 1).dim(3).set_bounds(0, B);
    for (auto [out, channels] : {std::pair(&state_k_out, in.dk), std::pair(&state_v_out, in.dv)}) {
      out->dim(0).set_bounds(0, channels).dim(1).set_bounds(0, slots).dim(2).set_bounds(0, H).dim(3).set_bounds(0, B);
    }
  }

  void schedule() {
    if (get_target().has_feature(Target::CUDA)) {
      schedule_bla_step_cuda(stages, knobs(get_target()));
      return;
    }
    schedule_bla_step_cpu(stages, knobs(get_target()));
  }

 private:
  BlaStepStages stages{ChunkGrid(Expr(1), 1)};
};

}  // namespace fsattn

HALIDE_REGISTER_GENERATOR(fsattn::BlaStepGenerator, bla_step)
