// The kernel table: every compiled kernel variant, generated from generators/CMakeLists.txt.
// Dispatch, the variant-listing API, the tests and the benchmarks all read this one table.
#pragma once

#include "fsattn/fsattn.h"

#include <HalideRuntime.h>

#include <initializer_list>
#include <string>

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
  // 4: a CUDA step that reads and writes its states (BLA's: q, k and v too) 4 floats at a
  // time, 128-bit loads and stores, so only for calls whose channel counts are multiples of
  // 4 and whose pointers to those are 16-byte aligned (fit_vector_rows); 0 otherwise.
  int vector;
};

struct CallShape;

// The kernel for (op, device) named `variant`; when variant is NULL, the one the tuning table
// picks for `shape` (tuning.h), else the default (the first row). Returns NULL and sets the
// last error (prefixed by `function`) when there is none.
const Kernel *find_kernel(const char *function, fsattn_op op, fsattn_device device, const char *variant,
                          const CallShape &shape, fsattn_status *status);

// A name and value checked by fit_vector_rows: a channel count, or a pointer.
template <typename T>
struct Named {
  const char *name;
  T value;
};

// The kernel to run instead of k (found by find_kernel for `variant`) where k reads vectors
// (Kernel::vector) and the call does not fit them: a channel count not a multiple of 4, or a
// pointer not 16-byte aligned. A variant the caller named is refused (NULL, the last error
// set to FSATTN_ERROR_INVALID_ARGUMENT with what does not fit); one the tuning table or the
// default picked is replaced by the first row of (op, device) that does not read vectors.
const Kernel *fit_vector_rows(const char *function, const Kernel *k, const char *variant,
                              std::initializer_list<Named<int64_t>> channels,
                              std::initializer_list<Named<const void *>> pointers, fsattn_status *status);

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
// most 65535 blocks (schedules/cuda.cpp), a CUDA step its heads and sequences: a call with
// more is refused as unsupported, with the remedy in the message. FSATTN_OK for every other
// kernel.
fsattn_status check_cuda_grid(const char *function, const Kernel &k, const fsattn_dims *dims);

}  // namespace fsattn
