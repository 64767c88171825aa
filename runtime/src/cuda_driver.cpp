#include "cuda_driver.h"

#include <dlfcn.h>

namespace fsattn {
namespace cu {

namespace {

struct Loaded {
  Driver d{};
  std::string why;  // empty when loaded
};

template <typename Fn>
bool bind(void *lib, const char *name, Fn &fn, std::string &why) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (fn == nullptr && why.empty()) why = std::string("libcuda.so.1 has no ") + name;
  return fn != nullptr;
}

Loaded load() {
  Loaded l;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char *e = dlerror();
    l.why = std::string("no NVIDIA driver (libcuda.so.1 could not be loaded: ") + (e ? e : "unknown") + ")";
    return l;
  }
  Driver &d = l.d;
  std::string &w = l.why;
  bind(lib, "cuInit", d.Init, w);
  bind(lib, "cuDriverGetVersion", d.DriverGetVersion, w);
  bind(lib, "cuDeviceGetCount", d.DeviceGetCount, w);
  bind(lib, "cuDeviceGet", d.DeviceGet, w);
  bind(lib, "cuDeviceGetName", d.DeviceGetName, w);
  bind(lib, "cuDeviceGetAttribute", d.DeviceGetAttribute, w);
  bind(lib, "cuDevicePrimaryCtxRetain", d.DevicePrimaryCtxRetain, w);
  bind(lib, "cuCtxGetCurrent", d.CtxGetCurrent, w);
  bind(lib, "cuCtxSetCurrent", d.CtxSetCurrent, w);
  bind(lib, "cuCtxGetDevice", d.CtxGetDevice, w);
  bind(lib, "cuCtxPushCurrent_v2", d.CtxPushCurrent, w);
  bind(lib, "cuCtxPopCurrent_v2", d.CtxPopCurrent, w);
  bind(lib, "cuCtxSynchronize", d.CtxSynchronize, w);
  bind(lib, "cuCtxCreate_v2", d.CtxCreate, w);
  bind(lib, "cuCtxDestroy_v2", d.CtxDestroy, w);
  bind(lib, "cuPointerGetAttributes", d.PointerGetAttributes, w);
  bind(lib, "cuMemAlloc_v2", d.MemAlloc, w);
  bind(lib, "cuMemFree_v2", d.MemFree, w);
  bind(lib, "cuMemsetD32Async", d.MemsetD32Async, w);
  bind(lib, "cuMemsetD2D32Async", d.MemsetD2D32Async, w);
  bind(lib, "cuMemcpyHtoD_v2", d.MemcpyHtoD, w);
  bind(lib, "cuMemcpyDtoH_v2", d.MemcpyDtoH, w);
  bind(lib, "cuMemcpyDtoDAsync_v2", d.MemcpyDtoDAsync, w);
  bind(lib, "cuStreamCreate", d.StreamCreate, w);
  bind(lib, "cuStreamDestroy_v2", d.StreamDestroy, w);
  bind(lib, "cuStreamSynchronize", d.StreamSynchronize, w);
  bind(lib, "cuStreamGetCtx", d.StreamGetCtx, w);
  bind(lib, "cuEventCreate", d.EventCreate, w);
  bind(lib, "cuEventDestroy_v2", d.EventDestroy, w);
  bind(lib, "cuEventRecord", d.EventRecord, w);
  bind(lib, "cuEventSynchronize", d.EventSynchronize, w);
  bind(lib, "cuEventElapsedTime", d.EventElapsedTime, w);
  bind(lib, "cuModuleLoadDataEx", d.ModuleLoadDataEx, w);
  bind(lib, "cuGetErrorName", d.GetErrorName, w);
  bind(lib, "cuGetErrorString", d.GetErrorString, w);
  if (!w.empty()) return l;
  const Result r = d.Init(0);
  if (r != kSuccess) {
    w = "cuInit failed: " + error_text(d, r);
    return l;
  }
  int count = 0;
  if (d.DeviceGetCount(&count) != kSuccess || count == 0) w = "the NVIDIA driver reports no CUDA device";
  return l;
}

}  // namespace

const Driver *driver(std::string *why) {
  static const Loaded loaded = load();
  if (!loaded.why.empty()) {
    if (why != nullptr) *why = loaded.why;
    return nullptr;
  }
  return &loaded.d;
}

std::string error_text(const Driver &d, Result r) {
  const char *name = nullptr, *text = nullptr;
  if (d.GetErrorName == nullptr || d.GetErrorName(r, &name) != kSuccess) name = nullptr;
  if (d.GetErrorString == nullptr || d.GetErrorString(r, &text) != kSuccess) text = nullptr;
  std::string s = name ? name : "CUDA error " + std::to_string(r);
  if (text != nullptr) s += std::string(" (") + text + ")";
  return s;
}

}  // namespace cu
}  // namespace fsattn
