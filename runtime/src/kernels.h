// The kernel table: every compiled kernel variant, generated from generators/CMakeLists.txt.
// Dispatch, the variant-listing API, the tests and the benchmarks all read this one table.
#pragma once

#include "fsattn/fsattn.h"

#include <HalideRuntime.h>

#include <string>

namespace fsattn {

struct Kernel {
  fsattn_op op;
  fsattn_device device;
  const char *variant;   // e.g. "cpu_c32"
  const char *schedule;  // "hand", or the autoscheduler that produced it
  int chunk;             // chunk length L
  int registers;         // CUDA: the register budget per thread of its wide kernels (cuda_call.h); CPU: 0
  int (*argv)(void **);  // the AOT entry point, Halide's argv convention
  const halide_filter_metadata_t *(*metadata)();  // its target(s), arguments
  const char *name;                               // the AOT function, e.g. "fsattn_ida_forward__cpu_c32"
};

struct CallShape;

// The kernel for (op, device) named `variant`; when variant is NULL, the one the tuning table
// picks for `shape` (tuning.h), else the default (the first row). Returns NULL and sets the
// last error (prefixed by `function`) when there is none.
const Kernel *find_kernel(const char *function, fsattn_op op, fsattn_device device, const char *variant,
                          const CallShape &shape, fsattn_status *status);

// The row of (op, device) named `variant`, or NULL; whether a CPU can run it is not checked.
const Kernel *compiled_kernel(fsattn_op op, fsattn_device device, const char *variant);
// Whether this machine can run the kernel (a CPU kernel: whether this CPU has its features).
bool kernel_runs_here(const Kernel &k);

// "ida_forward" for FSATTN_OP_IDA_FORWARD; parse_op is its inverse (false: no such op).
const char *op_name(fsattn_op op);
bool parse_op(const std::string &name, fsattn_op *op);

// The device's name as tuning files record it: this CPU's model, or the GPU calls would run on
// (the current context's device, else device 0) with its compute capability. Empty (with
// the reason in *why, when given) if there is none.
std::string device_name(fsattn_device device, std::string *why);

// A CUDA scan kernel runs its chunks, heads and batch elements along grid dimensions of at
// most 65535 blocks (schedules/cuda/tiles.cpp), a CUDA step its heads and sequences: a call with
// more is refused as unsupported, with the remedy in the message. FSATTN_OK for every other
// kernel.
fsattn_status check_cuda_grid(const char *function, const Kernel &k, const fsattn_dims *dims);

}  // namespace fsattn
