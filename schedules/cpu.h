// CPU schedules, one function per generator. Parallel across batch × head × chunk,
// vectorized across channels; the chunk-to-chunk carry is the only serial loop.
#pragma once

#include "generators/bla_backward.h"
#include "generators/bla_forward.h"
#include "generators/dirichlet.h"
#include "generators/ida_backward.h"
#include "generators/ida_forward.h"
#include "generators/step.h"
#include "knobs.h"

namespace fsattn {

void schedule_ida_forward_cpu(IdaForwardStages &s, const Knobs &k);
void schedule_ida_backward_cpu(IdaBackwardStages &s, const Knobs &k);
void schedule_bla_forward_cpu(BlaForwardStages &s, const Knobs &k);
void schedule_bla_backward_cpu(BlaBackwardStages &s, const Knobs &k);
void schedule_ida_step_cpu(IdaStepStages &s, const Knobs &k);
void schedule_bla_step_cpu(BlaStepStages &s, const Knobs &k);
void schedule_bla_interpolate_cpu(DirichletInterpolation &d, const Knobs &k);

}  // namespace fsattn
