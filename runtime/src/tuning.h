// The tuning table: which compiled variant a call runs when exec->variant is NULL, by op,
// device and shape. It comes from a file written by fsattn-tune (fsattn_load_tuning, or the
// FSATTN_TUNING environment variable read at the first call), else from the built-in table
// measured on the H200 (runtime/tuning/builtin.json). An entry is one measured shape and the
// variant that was fastest there; a call takes the entry nearest to its shape (tuning.cpp).
#pragma once

#include "fsattn/fsattn.h"
#include "kernels.h"

#include <cstdint>

namespace fsattn {

// The sizes a call's speed depends on. features: IDA modes or BLA slots.
struct CallShape {
  int64_t batch, seqlen, heads, dk, dv, features;
};

// A dense call's shape (with cu_seqlens, one sequence's: each runs as a dense call).
inline CallShape call_shape(const fsattn_dims *dims, int64_t features) {
  return {dims->batch, dims->seqlen, dims->heads, dims->dk, dims->dv, features};
}

// The variant the table picks for this call, or NULL when it has no entry for (op, device)
// (the kernel table's first row is then the default).
const Kernel *tuned_kernel(fsattn_op op, fsattn_device device, const CallShape &shape);

}  // namespace fsattn
