// The kernel table: every compiled kernel variant, generated from generators/CMakeLists.txt.
// Dispatch, the variant-listing API, the tests and the benchmarks all read this one table.
#pragma once

#include "fsattn/fsattn.h"

#include <HalideRuntime.h>

namespace fsattn {

struct Kernel {
  fsattn_op op;
  fsattn_device device;
  const char *variant;   // e.g. "cpu_c32"
  const char *schedule;  // "hand", or the autoscheduler that produced it
  int chunk;             // chunk length L
  int (*argv)(void **);  // the AOT entry point, Halide's argv convention
  const halide_filter_metadata_t *(*metadata)();  // its target(s), arguments
  const char *name;      // the AOT function, e.g. "fsattn_ida_forward__cpu_c32"
};

// The kernel for (op, device) named `variant`, or the default one when variant is NULL.
// Returns NULL and sets the last error (prefixed by `function`) when there is none.
const Kernel *find_kernel(const char *function, fsattn_op op, fsattn_device device, const char *variant,
                          fsattn_status *status);

// A CUDA scan kernel runs its chunks, heads and batch elements along grid dimensions of at
// most 65535 blocks (schedules/cuda.cpp): a call with more chunks (seqlen / chunk), heads or
// batch elements is refused as unsupported, with the remedy in the message. FSATTN_OK for
// every other kernel.
fsattn_status check_cuda_grid(const char *function, const Kernel &k, const fsattn_dims *dims);

}  // namespace fsattn
