// The CUDA driver API, loaded at run time (dlopen of libcuda.so.1), so that the library, its
// tests and benchmarks build and run on machines without an NVIDIA driver: there, every CUDA
// call reports the driver as absent. Only the entry points fsattn uses are declared.
#pragma once

#include <cstddef>
#include <string>

namespace fsattn {
namespace cu {

using Result = int;  // CUresult: 0 is success
using Device = int;
using Context = void *;
using Stream = void *;
using Event = void *;
using DevicePtr = unsigned long long;
using Module = void *;

constexpr Result kSuccess = 0;
constexpr Result kErrorOutOfMemory = 2;
constexpr int kPointerAttributeMemoryType = 2;                                    // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr int kPointerAttributeRangeStart = 11, kPointerAttributeRangeSize = 12;  // ..._RANGE_START_ADDR, _SIZE
constexpr unsigned kMemoryTypeHost = 1, kMemoryTypeDevice = 2, kMemoryTypeUnified = 4;
constexpr int kAttributeComputeCapabilityMajor = 75, kAttributeComputeCapabilityMinor = 76;
constexpr unsigned kStreamNonBlocking = 1;
constexpr int kJitMaxRegisters = 0;  // CU_JIT_MAX_REGISTERS

struct Driver {
  Result (*Init)(unsigned flags);
  Result (*DriverGetVersion)(int *version);
  Result (*DeviceGetCount)(int *count);
  Result (*DeviceGet)(Device *device, int ordinal);
  Result (*DeviceGetName)(char *name, int length, Device device);
  Result (*DeviceGetAttribute)(int *value, int attribute, Device device);
  Result (*DevicePrimaryCtxRetain)(Context *ctx, Device device);
  Result (*CtxGetCurrent)(Context *ctx);
  Result (*CtxSetCurrent)(Context ctx);
  Result (*CtxGetDevice)(Device *device);
  Result (*CtxPushCurrent)(Context ctx);
  Result (*CtxPopCurrent)(Context *ctx);
  Result (*CtxSynchronize)();
  Result (*CtxCreate)(Context *ctx, unsigned flags, Device device);
  Result (*CtxDestroy)(Context ctx);
  Result (*PointerGetAttributes)(unsigned count, int *attributes, void **data, DevicePtr ptr);
  Result (*MemAlloc)(DevicePtr *ptr, size_t bytes);
  Result (*MemFree)(DevicePtr ptr);
  Result (*MemsetD32Async)(DevicePtr ptr, unsigned value, size_t count, Stream stream);
  Result (*MemsetD2D32Async)(DevicePtr ptr, size_t pitch_bytes, unsigned value, size_t width, size_t height,
                             Stream stream);
  Result (*MemcpyHtoD)(DevicePtr dst, const void *src, size_t bytes);
  Result (*MemcpyDtoH)(void *dst, DevicePtr src, size_t bytes);
  Result (*MemcpyDtoDAsync)(DevicePtr dst, DevicePtr src, size_t bytes, Stream stream);
  Result (*StreamCreate)(Stream *stream, unsigned flags);
  Result (*StreamDestroy)(Stream stream);
  Result (*StreamSynchronize)(Stream stream);
  Result (*StreamGetCtx)(Stream stream, Context *ctx);
  Result (*EventCreate)(Event *event, unsigned flags);
  Result (*EventDestroy)(Event event);
  Result (*EventRecord)(Event event, Stream stream);
  Result (*EventSynchronize)(Event event);
  Result (*EventElapsedTime)(float *ms, Event start, Event end);
  Result (*ModuleLoadDataEx)(Module *module, const void *image, unsigned count, int *options, void **values);
  Result (*GetErrorName)(Result error, const char **name);
  Result (*GetErrorString)(Result error, const char **text);
};

// The driver, loaded and initialised once (cuInit), or NULL with the reason in *why.
const Driver *driver(std::string *why);

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)" for a driver result.
std::string error_text(const Driver &d, Result r);

}  // namespace cu
}  // namespace fsattn
