// The CUDA side of a kernel call: the caller's context and stream, device memory checks, and
// the device scalars that stand in for NULL states. Compiled in builds with CUDA kernels.
#pragma once

#include "cuda_driver.h"
#include "fsattn/fsattn.h"

#include <cstddef>
#include <vector>

namespace fsattn {

// Halide's own budget: 64 registers a thread.
constexpr int kDefaultMaxRegisters = 64;

// Where a CUDA kernel runs: the context current on the calling thread (else the primary
// context of device 0, the one the CUDA runtime API would make current) and the caller's
// stream. Halide's CUDA runtime is pointed at both through the call's user_context.
struct CudaTarget {
  cu::Context context = nullptr;
  cu::Stream stream = nullptr;
  // The register budget per thread of the pipeline's wide kernels (its row of the kernel
  // table), with which the driver compiles them on the pipeline's first call in a context;
  // its other kernels get kDefaultMaxRegisters (see compile_kernel in cuda_call.cpp).
  int max_registers = kDefaultMaxRegisters;
};

// Points Halide's CUDA runtime at the context and stream of each call. Its device buffers
// come from the CUDA workspace (cuda_call.cpp), which keeps freed blocks for reuse on the
// stream that freed them. `target_of` finds the CudaTarget of a call from Halide's
// user_context.
void install_cuda_hooks(CudaTarget *(*target_of)(void *user_context));

// Frees every block the CUDA workspace keeps (fsattn_release_workspace).
void release_device_workspace();

// The target of a call on `stream` (NULL: the legacy default stream), or
// FSATTN_ERROR_DEVICE (no driver, no device, no context) with the message set.
fsattn_status cuda_target(const char *function, void *stream, CudaTarget *t);

// A call's pointer argument: [ptr, ptr + bytes), named `name` in messages.
struct DeviceRange {
  const char *name;
  const void *ptr;
  size_t bytes;
};

// Each range must be CUDA device (or managed) memory inside one allocation: host memory, or
// a buffer smaller than its shape, is FSATTN_ERROR_INVALID_ARGUMENT naming the first such.
fsattn_status check_device_memory(const CudaTarget &t, const char *function, const std::vector<DeviceRange> &ranges);

// A device float that reads as zero (a NULL initial state) and one that kernels may write
// (a NULL final state), per context, allocated on first use and kept.
fsattn_status device_scalars(const CudaTarget &t, const char *function, void **zero, void **sink);

// Fills count floats with NaN on the call's stream (the outputs of a failed call); or
// `rows` rows of `width` floats, `pitch` floats apart.
void fill_nan(const CudaTarget &t, void *ptr, size_t count);
void fill_nan(const CudaTarget &t, void *ptr, size_t width, size_t pitch, size_t rows);

// `count` floats of device scratch from the CUDA workspace, for work queued on t's stream;
// returned with free_device_scratch once that work is queued (the workspace hands a block
// out again only on the same stream, after it). FSATTN_ERROR_OUT_OF_MEMORY with the message
// set when there is none.
fsattn_status device_scratch(const CudaTarget &t, const char *function, size_t count, float **ptr);
void free_device_scratch(const CudaTarget &t, float *ptr, size_t count);
// Queued on t's stream: count floats copied from src to dst (device memory both), or zeroed.
void copy_device(const CudaTarget &t, float *dst, const float *src, size_t count);
void zero_device(const CudaTarget &t, float *dst, size_t count);

}  // namespace fsattn
