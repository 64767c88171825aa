#include "cuda_call.h"

#include "ptx_budgets.h"
#include "schedules/register_budget.h"
#include "status.h"

#include <HalideRuntime.h>
#include <HalideRuntimeCuda.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace fsattn {

namespace {

CudaTarget *(*g_target_of)(void *) = nullptr;

int acquire_context(void *user_context, void **ctx, bool create) {
  CudaTarget *t = user_context != nullptr ? g_target_of(user_context) : nullptr;
  if (t != nullptr && t->context != nullptr) {
    *ctx = t->context;
    return 0;
  }
  // Outside a call (Halide's own clean-up): the thread's current context, if any.
  *ctx = nullptr;
  const cu::Driver *d = cu::driver(nullptr);
  if (d != nullptr) d->CtxGetCurrent(ctx);
  return (*ctx == nullptr && create) ? -1 : 0;
}

int release_context(void *) { return 0; }

int get_stream(void *user_context, void *, void **stream) {
  CudaTarget *t = user_context != nullptr ? g_target_of(user_context) : nullptr;
  *stream = t != nullptr ? t->stream : nullptr;
  return 0;
}

// The context pushed for the runtime's own driver calls, popped on scope exit.
class ScopedContext {
 public:
  ScopedContext(const cu::Driver &d, cu::Context ctx) : d_(d), ok_(d.CtxPushCurrent(ctx) == cu::kSuccess) {}
  ~ScopedContext() {
    cu::Context old;
    if (ok_) d_.CtxPopCurrent(&old);
  }
  bool ok() const { return ok_; }

 private:
  const cu::Driver &d_;
  bool ok_;
};

// The CUDA workspace: device blocks that kernel intermediates are allocated from, kept for
// reuse when freed, per context and stream (a block freed on one stream is handed out only
// on that stream, where the work that used it comes first). Sizes are rounded up to 4
// significant bits so that similar requests share blocks. Halide 14's own cache (which this
// replaces) can hand out a block it has just freed when its list grows past 32 entries: IDA
// forward at B=8, T=4096, H=16 wrote through such a pointer (CUDA_ERROR_ILLEGAL_ADDRESS, H200).
struct CachedBlock {
  cu::Context context;
  cu::Stream stream;
  size_t bytes;
  cu::DevicePtr ptr;
};
std::mutex g_cache_lock;
std::vector<CachedBlock> g_cache;

size_t rounded_size(size_t bytes) {
  if (bytes <= 256) return 256;
  int bits = 0;
  while ((bytes >> bits) > 15) ++bits;  // keep the top 4 bits
  const size_t unit = size_t(1) << bits;
  return (bytes + unit - 1) / unit * unit;
}

// Frees every cached block of `context` (all contexts when NULL).
void release_cached(cu::Context context) {
  const cu::Driver *d = cu::driver(nullptr);
  if (d == nullptr) return;
  std::vector<CachedBlock> freed;
  {
    std::lock_guard<std::mutex> guard(g_cache_lock);
    for (size_t i = 0; i < g_cache.size();) {
      if (context == nullptr || g_cache[i].context == context) {
        freed.push_back(g_cache[i]);
        g_cache[i] = g_cache.back();
        g_cache.pop_back();
      } else {
        ++i;
      }
    }
  }
  for (const CachedBlock &b : freed) {
    ScopedContext scope(*d, b.context);
    if (scope.ok()) d->MemFree(b.ptr);
  }
}

}  // namespace

}  // namespace fsattn

namespace fsattn {
namespace {

// A block of at least `bytes` for t's context and stream: a cached one of its rounded size,
// else a new one (after freeing the context's cached blocks, if the device is full).
cu::Result take_device_block(const CudaTarget &t, size_t bytes, cu::DevicePtr *out) {
  const cu::Driver *d = cu::driver(nullptr);
  bytes = rounded_size(bytes);
  *out = 0;
  {
    std::lock_guard<std::mutex> guard(g_cache_lock);
    for (size_t i = 0; i < g_cache.size(); ++i) {
      const CachedBlock &b = g_cache[i];
      if (b.context == t.context && b.stream == t.stream && b.bytes == bytes) {
        *out = b.ptr;
        g_cache[i] = g_cache.back();
        g_cache.pop_back();
        return cu::kSuccess;
      }
    }
  }
  ScopedContext scope(*d, t.context);
  cu::Result r = scope.ok() ? d->MemAlloc(out, bytes) : cu::Result(-1);
  if (r == cu::kErrorOutOfMemory) {
    release_cached(t.context);
    r = d->MemAlloc(out, bytes);
  }
  return r;
}

void give_device_block(const CudaTarget &t, size_t bytes, cu::DevicePtr p) {
  std::lock_guard<std::mutex> guard(g_cache_lock);
  g_cache.push_back({t.context, t.stream, rounded_size(bytes), p});
}

}  // namespace
}  // namespace fsattn

// Halide's device allocator for CUDA buffers, replaced (the runtime's definitions are weak).
extern "C" int halide_cuda_device_malloc(void *user_context, halide_buffer_t *buf) {
  using namespace fsattn;
  if (buf->device != 0) return 0;
  CudaTarget *t = user_context != nullptr ? g_target_of(user_context) : nullptr;
  const cu::Driver *d = cu::driver(nullptr);
  if (t == nullptr || t->context == nullptr || d == nullptr) {
    halide_error(user_context, "CUDA: a device allocation outside an fsattn call");
    return halide_error_code_device_malloc_failed;
  }
  cu::DevicePtr p = 0;
  const cu::Result r = take_device_block(*t, buf->size_in_bytes(), &p);
  if (r != cu::kSuccess) {
    halide_error(user_context, ("CUDA: cuMemAlloc of " + std::to_string(rounded_size(buf->size_in_bytes())) +
                                " bytes failed: " + cu::error_text(*d, r))
                                   .c_str());
    return halide_error_code_device_malloc_failed;
  }
  return halide_cuda_wrap_device_ptr(user_context, buf, p);  // (the runtime's module count too)
}

extern "C" int halide_cuda_device_free(void *user_context, halide_buffer_t *buf) {
  using namespace fsattn;
  if (buf->device == 0) return 0;
  CudaTarget *t = user_context != nullptr ? g_target_of(user_context) : nullptr;
  const cu::DevicePtr p = cu::DevicePtr(buf->device);
  if (t != nullptr && t->context != nullptr) {
    give_device_block(*t, buf->size_in_bytes(), p);
  } else if (const cu::Driver *d = cu::driver(nullptr)) {
    d->MemFree(p);
  }
  return halide_cuda_detach_device_ptr(user_context, buf);
}

// Halide's PTX compilation, replaced (the runtime's definition is weak): the driver compiles
// each pipeline's PTX on its first call in a context. Halide's own gives every kernel 64
// registers a thread, and most 4×4 register tiles spilled to local memory there (at B=8
// T=4096 H=16 D=M=S=64 on the H200, IDA's backward read within the chunk, hk_intra, took
// 2.61 ms at 64 registers and 0.85 ms at 128; Nsight Compute). Here the kernels that the
// schedule names wide (schedules/register_budget.h) get the call's CudaTarget::max_registers
// (the kernel table's, from generators/CMakeLists.txt), those it names large (8×8 tiles)
// 255, and every other kernel 64, the budget of kernels that lose occupancy with more
// (with_wide_budgets). As in Halide,
// HL_CUDA_JIT_MAX_REGISTERS, when set, is the budget of every kernel (for experiments).
// Returns NULL, with the message given to Halide's error handler, when the driver refuses
// the PTX.
namespace Halide::Runtime::Internal::Cuda {
fsattn::cu::Module compile_kernel(void *user_context, const char *ptx, int size);
fsattn::cu::Module compile_kernel(void *user_context, const char *ptx, int) {
  using namespace fsattn;
  std::string why;
  const cu::Driver *d = cu::driver(&why);
  if (d == nullptr) {
    halide_error(user_context, ("CUDA: " + why).c_str());
    return nullptr;
  }
  const CudaTarget *t = user_context != nullptr ? g_target_of(user_context) : nullptr;
  static const int from_env = [] {
    const char *env = std::getenv("HL_CUDA_JIT_MAX_REGISTERS");
    return env != nullptr ? std::atoi(env) : 0;
  }();
  const int wide = t != nullptr ? t->max_registers : kDefaultMaxRegisters;
  const int registers = from_env > 0 ? from_env : kDefaultMaxRegisters;
  // (The PTX is copied only to be rewritten.)
  const bool one_budget = from_env > 0 || (wide == kDefaultMaxRegisters && std::strstr(ptx, kLargeKernel) == nullptr);
  const std::string rewritten = one_budget ? std::string() : with_wide_budgets(ptx, wide);
  const char *source = one_budget ? ptx : rewritten.c_str();
  int options[] = {cu::kJitMaxRegisters};
  void *values[] = {reinterpret_cast<void *>(uintptr_t(registers))};
  cu::Module module = nullptr;
  const cu::Result r = d->ModuleLoadDataEx(&module, source, 1, options, values);
  if (r != cu::kSuccess) {
    halide_error(user_context, ("CUDA: cuModuleLoadDataEx failed: " + cu::error_text(*d, r)).c_str());
    return nullptr;
  }
  return module;
}
}  // namespace Halide::Runtime::Internal::Cuda

namespace fsattn {

void release_device_workspace() { release_cached(nullptr); }

void install_cuda_hooks(CudaTarget *(*target_of)(void *)) {
  g_target_of = target_of;
  halide_set_cuda_acquire_context(acquire_context);
  halide_set_cuda_release_context(release_context);
  halide_set_cuda_get_stream(get_stream);
}

fsattn_status cuda_target(const char *function, void *stream, CudaTarget *t) {
  std::string why;
  const cu::Driver *d = cu::driver(&why);
  if (d == nullptr) return fail(FSATTN_ERROR_DEVICE, std::string(function) + ": CUDA is not available: " + why);
  cu::Context ctx = nullptr;
  cu::Result r = d->CtxGetCurrent(&ctx);
  if (r == cu::kSuccess && ctx == nullptr) {
    // No context on this thread: device 0's primary context, retained once for the process.
    static std::once_flag once;
    static cu::Context primary = nullptr;
    static cu::Result primary_result = cu::kSuccess;
    std::call_once(once, [&] {
      cu::Device dev = 0;
      primary_result = d->DeviceGet(&dev, 0);
      if (primary_result == cu::kSuccess) primary_result = d->DevicePrimaryCtxRetain(&primary, dev);
    });
    r = primary_result;
    ctx = primary;
  }
  if (r != cu::kSuccess || ctx == nullptr) {
    return fail(FSATTN_ERROR_DEVICE,
                std::string(function) + ": no CUDA context for the call: " + cu::error_text(*d, r));
  }
  // A stream of another context would fail at the launch, and so would filling the outputs
  // with NaN on it: refused first. (The legacy and per-thread default streams are handles 1
  // and 2, valid in any context.)
  const uintptr_t handle = reinterpret_cast<uintptr_t>(stream);
  if (handle > 2) {
    cu::Context owner = nullptr;
    r = d->StreamGetCtx(stream, &owner);
    if (r != cu::kSuccess) {
      return fail(FSATTN_ERROR_INVALID_ARGUMENT,
                  std::string(function) + ": exec->stream is not a usable CUDA stream: " + cu::error_text(*d, r));
    }
    if (owner != ctx) {
      return fail(FSATTN_ERROR_INVALID_ARGUMENT,
                  std::string(function) +
                      ": exec->stream belongs to another CUDA context than the call's (the one "
                      "current on this thread, else device 0's primary context)");
    }
  }
  t->context = ctx;
  t->stream = stream;
  return FSATTN_OK;
}

fsattn_status check_device_memory(const CudaTarget &t, const char *function, const std::vector<DeviceRange> &ranges) {
  // One context push for the call and one driver query per distinct pointer (a decode step
  // passes up to 17 pointers, its states twice; each once cost a push, cuPointerGetAttribute,
  // cuMemGetAddressRange and a pop).
  const cu::Driver *d = cu::driver(nullptr);
  ScopedContext scope(*d, t.context);
  for (size_t i = 0; i < ranges.size(); ++i) {
    const DeviceRange &r = ranges[i];
    bool seen = false;
    for (size_t j = 0; j < i && !seen; ++j) seen = ranges[j].ptr == r.ptr && ranges[j].bytes >= r.bytes;
    if (seen) continue;
    auto refuse = [&](const std::string &why) {
      return fail(FSATTN_ERROR_INVALID_ARGUMENT, std::string(function) + ": " + r.name + why);
    };
    const cu::DevicePtr p = cu::DevicePtr(reinterpret_cast<uintptr_t>(r.ptr));
    unsigned type = 0;
    cu::DevicePtr base = 0;
    size_t size = 0;
    int attributes[3] = {cu::kPointerAttributeMemoryType, cu::kPointerAttributeRangeStart,
                         cu::kPointerAttributeRangeSize};
    void *values[3] = {&type, &base, &size};
    // (Memory the driver does not know reads as type 0, with success.)
    const cu::Result res = scope.ok() ? d->PointerGetAttributes(3, attributes, values, p) : cu::Result(-1);
    if (res != cu::kSuccess || type == 0) {
      return refuse(" is not CUDA memory (exec->device is CUDA: pointers must be device memory)");
    }
    if (type == cu::kMemoryTypeHost) return refuse(" is pinned host memory; CUDA calls take device memory");
    if (size != 0 && p + r.bytes > base + size) {
      return refuse(" needs " + std::to_string(r.bytes) + " bytes, but its allocation has " +
                    std::to_string(base + size - p) + " from that address");
    }
  }
  return FSATTN_OK;
}

fsattn_status device_scalars(const CudaTarget &t, const char *function, void **zero, void **sink) {
  static std::mutex lock;
  static std::vector<std::pair<cu::Context, cu::DevicePtr>> blocks;  // one per context, never freed
  std::lock_guard<std::mutex> guard(lock);
  cu::DevicePtr block = 0;
  for (const auto &[ctx, ptr] : blocks) {
    if (ctx == t.context) block = ptr;
  }
  if (block == 0) {
    const cu::Driver *d = cu::driver(nullptr);
    ScopedContext scope(*d, t.context);
    const float zeros[2] = {0.0f, 0.0f};
    cu::Result r = scope.ok() ? d->MemAlloc(&block, sizeof zeros) : cu::Result(-1);
    if (r == cu::kSuccess) r = d->MemcpyHtoD(block, zeros, sizeof zeros);
    if (r != cu::kSuccess) {
      return fail(r == cu::kErrorOutOfMemory ? FSATTN_ERROR_OUT_OF_MEMORY : FSATTN_ERROR_DEVICE,
                  std::string(function) + ": could not allocate 8 bytes of device memory: " + cu::error_text(*d, r));
    }
    blocks.emplace_back(t.context, block);
  }
  // The sink is written, never read: concurrent calls may write it at once.
  *zero = reinterpret_cast<void *>(uintptr_t(block));
  *sink = reinterpret_cast<void *>(uintptr_t(block + sizeof(float)));
  return FSATTN_OK;
}

fsattn_status device_scratch(const CudaTarget &t, const char *function, size_t count, float **ptr) {
  cu::DevicePtr p = 0;
  const cu::Result r = take_device_block(t, count * sizeof(float), &p);
  if (r != cu::kSuccess) {
    *ptr = nullptr;
    return fail(r == cu::kErrorOutOfMemory ? FSATTN_ERROR_OUT_OF_MEMORY : FSATTN_ERROR_DEVICE,
                std::string(function) + ": could not allocate " + std::to_string(count * sizeof(float)) +
                    " bytes of device memory: " + cu::error_text(*cu::driver(nullptr), r));
  }
  *ptr = reinterpret_cast<float *>(uintptr_t(p));
  return FSATTN_OK;
}

void free_device_scratch(const CudaTarget &t, float *ptr, size_t count) {
  if (ptr != nullptr) give_device_block(t, count * sizeof(float), cu::DevicePtr(reinterpret_cast<uintptr_t>(ptr)));
}

void copy_device(const CudaTarget &t, float *dst, const float *src, size_t count) {
  const cu::Driver *d = cu::driver(nullptr);
  ScopedContext scope(*d, t.context);
  if (scope.ok()) {
    d->MemcpyDtoDAsync(cu::DevicePtr(reinterpret_cast<uintptr_t>(dst)), cu::DevicePtr(reinterpret_cast<uintptr_t>(src)),
                       count * sizeof(float), t.stream);
  }
}

void zero_device(const CudaTarget &t, float *dst, size_t count) {
  const cu::Driver *d = cu::driver(nullptr);
  ScopedContext scope(*d, t.context);
  if (scope.ok()) d->MemsetD32Async(cu::DevicePtr(reinterpret_cast<uintptr_t>(dst)), 0, count, t.stream);
}

void fill_nan(const CudaTarget &t, void *ptr, size_t count) { fill_nan(t, ptr, count, count, 1); }

void fill_nan(const CudaTarget &t, void *ptr, size_t width, size_t pitch, size_t rows) {
  const cu::Driver *d = cu::driver(nullptr);
  ScopedContext scope(*d, t.context);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  unsigned bits;
  std::memcpy(&bits, &nan, sizeof bits);
  if (!scope.ok()) return;
  const cu::DevicePtr p = cu::DevicePtr(reinterpret_cast<uintptr_t>(ptr));
  if (rows == 1 || pitch == width) {
    d->MemsetD32Async(p, bits, width * rows, t.stream);
  } else {
    d->MemsetD2D32Async(p, pitch * sizeof(float), bits, width, rows, t.stream);
  }
}

}  // namespace fsattn
