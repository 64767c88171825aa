// Generator `ida_step`: one IDA decoding step (SPEC.md §5). Algorithm in step.cpp, schedules
// in schedules/.
#include "schedules/cpu.h"
#include "schedules/cuda.h"
#include "step.h"

using namespace Halide;

namespace fsattn {

class IdaStepGenerator : public Generator<IdaStepGenerator> {
 public:
  GeneratorParam<int> vector{"vector", 0};  // 0: the target's natural width
  GeneratorParam<int> threads{"threads", 128};  // CUDA threads per block

  Input<Buffer<float>> q{"q", 4};            // [B,1,H,Dk] as (d, h, t, b)
  Input<Buffer<float>> k{"k", 4};            // [B,1,H,Dk] as (d, h, t, b)
  Input<Buffer<float>> v{"v", 4};            // [B,1,H,Dv] as (r, h, t, b)
  Input<Buffer<float>> gk{"gk", 2};          // [H,Dk] as (d, h)
  Input<Buffer<float>> bk{"bk", 2};          // [H,Dk] as (d, h)
  Input<Buffer<float>> gv{"gv", 2};          // [H,Dv] as (r, h)
  Input<Buffer<float>> bv{"bv", 2};          // [H,Dv] as (r, h)
  Input<Buffer<float>> log_dt{"log_dt", 1};  // [H] as (h)
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
    IdaStepInputs in{q, k, v, gk, bk, gv, bv, log_dt, a_re_log, a_im, b_mode, c_mix, state_k, state_v,
                     eps, q.dim(0).extent(), v.dim(0).extent(), a_im.dim(0).extent()};
    stages = ida_step_algorithm(in);
    o = stages.o;
    state_k_out = stages.state_k_out;
    state_v_out = stages.state_v_out;
  }

  void schedule() {
    if (get_target().has_feature(Target::CUDA)) {
      CudaKnobs gpu;
      gpu.threads = threads;
      schedule_ida_step_cuda(stages, gpu);
      return;
    }
    CpuKnobs k;
    k.vector = vector > 0 ? int(vector) : get_target().natural_vector_size<float>();
    schedule_ida_step_cpu(stages, k);
  }

 private:
  IdaStepStages stages{ChunkGrid(Expr(1), 1)};
};

}  // namespace fsattn

HALIDE_REGISTER_GENERATOR(fsattn::IdaStepGenerator, ida_step)
