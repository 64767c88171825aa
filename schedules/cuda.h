// CUDA schedules, one function per generator. Parallel across batch × head × chunk × channel
// (the stages as separate kernels on the caller's stream: register tiles for the matmul-like
// reductions, a block per chunk for the sums per token, 32 × 4 threads for pointwise stages;
// schedules/cuda/ says why); the chunk-to-chunk carry is the only serial loop, inside its threads.
#pragma once

#include "generators/bla_backward.h"
#include "generators/bla_forward.h"
#include "generators/dirichlet.h"
#include "generators/ida_backward.h"
#include "generators/ida_forward.h"
#include "generators/step.h"
#include "knobs.h"

#include <vector>

namespace fsattn {

void schedule_ida_forward_cuda(IdaForwardStages &s, const Knobs &k);
// `sums`: the generator's parameter gradients, summed over the batch (batch_sum).
void schedule_ida_backward_cuda(IdaBackwardStages &s, const std::vector<Halide::Func> &sums, const Knobs &k);
void schedule_bla_forward_cuda(BlaForwardStages &s, const Knobs &k);
void schedule_bla_backward_cuda(BlaBackwardStages &s, const std::vector<Halide::Func> &sums, const Knobs &k);
void schedule_ida_step_cuda(IdaStepStages &s, const Knobs &k);
void schedule_bla_step_cuda(BlaStepStages &s, const Knobs &k);
void schedule_bla_interpolate_cuda(DirichletInterpolation &d, const Knobs &k);
// A pointwise sum over one dimension (the varlen backward's parameter gradients).
void schedule_gradient_sum_cuda(Halide::Func sum, const Knobs &k);

}  // namespace fsattn
