// Schedule knobs: plain values, one field per row of knobs.def, set from the generators'
// GeneratorParams (generators/knob_params.h), so that the build can compile several variants
// of one generator and the runtime can choose among them.
#pragma once

namespace fsattn {

struct Knobs {
#define FSATTN_KNOB(name, tag, default_value, scope, kind, meaning) int name = default_value;
#include "knobs.def"
#undef FSATTN_KNOB
};

}  // namespace fsattn
