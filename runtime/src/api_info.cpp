// Library information: the version, the devices' names, the variant a call would run.
#include "abi.h"
#include "kernels.h"
#include "status.h"
#include "tuning.h"
#include "validate.h"

#ifdef FSATTN_HAS_CUDA
#include "cuda_driver.h"
#endif

#include <fstream>
#include <string>

extern "C" const char *fsattn_version(void) { return FSATTN_VERSION_STRING; }

namespace fsattn {

namespace {

// The "model name" line of /proc/cpuinfo, or "x86-64" where there is none.
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string("x86-64") : line.substr(start);
  }
  return "x86-64";
}

std::string gpu_name(std::string *why) {
#ifdef FSATTN_HAS_CUDA
  const cu::Driver *d = cu::driver(why);
  if (d == nullptr) return "";
  cu::Context ctx = nullptr;
  cu::Device dev = 0;
  const bool current =
      d->CtxGetCurrent(&ctx) == cu::kSuccess && ctx != nullptr && d->CtxGetDevice(&dev) == cu::kSuccess;
  char name[256] = {0};
  int major = 0, minor = 0;
  if ((!current && d->DeviceGet(&dev, 0) != cu::kSuccess) ||
      d->DeviceGetName(name, sizeof name - 1, dev) != cu::kSuccess ||
      d->DeviceGetAttribute(&major, cu::kAttributeComputeCapabilityMajor, dev) != cu::kSuccess ||
      d->DeviceGetAttribute(&minor, cu::kAttributeComputeCapabilityMinor, dev) != cu::kSuccess) {
    if (why != nullptr) *why = "no CUDA device could be queried";
    return "";
  }
  return std::string(name) + " (compute capability " + std::to_string(major) + "." + std::to_string(minor) + ")";
#else
  if (why != nullptr) *why = "this build has no CUDA kernels";
  return "";
#endif
}

}  // namespace

std::string device_name(fsattn_device device, std::string *why) {
  if (device == FSATTN_DEVICE_CPU) {
    static const std::string cpu = cpu_model();
    return cpu;
  }
  return gpu_name(why);
}

}  // namespace fsattn

extern "C" const char *fsattn_device_name(fsattn_device device) {
  thread_local std::string name;
  const fsattn_status status = fsattn::guarded("fsattn_device_name", [&] {
    const int d = fsattn::enum_value(device);
    if (d != FSATTN_DEVICE_CPU && d != FSATTN_DEVICE_CUDA) {
      return fsattn::fail(FSATTN_ERROR_INVALID_ARGUMENT, "fsattn_device_name: unknown device " + std::to_string(d));
    }
    std::string why;
    name = fsattn::device_name(device, &why);
    return name.empty() ? fsattn::fail(FSATTN_ERROR_DEVICE, "fsattn_device_name: " + why) : FSATTN_OK;
  });
  return status == FSATTN_OK ? name.c_str() : nullptr;
}

extern "C" const char *fsattn_selected_variant(const fsattn_exec *exec, fsattn_op op, const fsattn_dims *dims,
                                               int64_t features) {
  const fsattn::Kernel *kernel = nullptr;
  fsattn::guarded("fsattn_selected_variant", [&] {
    fsattn::StructReader in("fsattn_selected_variant");
    fsattn_exec e;
    fsattn_dims d;
    exec = in.read("exec", exec, &e), dims = in.read("dims", dims, &d);
    if (!in.ok()) return in.status();
    fsattn::Validator val("fsattn_selected_variant");
    val.exec(exec).dims(dims, /*varlen_ok=*/false).range("features", features, 1, FSATTN_MAX_FEATURE);
    const int o = fsattn::enum_value(op);
    if (val.ok() && (o < FSATTN_OP_IDA_FORWARD || o > FSATTN_OP_BLA_STEP)) {
      val.fail(FSATTN_ERROR_INVALID_ARGUMENT, "op " + std::to_string(o) + " is not an fsattn_op");
    }
    if (!val.ok()) return val.status();
    fsattn_status status = FSATTN_OK;
    kernel = fsattn::find_kernel("fsattn_selected_variant", op, exec->device, exec->variant,
                                 fsattn::call_shape(dims, features), &status);
    return status;
  });
  return kernel != nullptr ? kernel->variant : nullptr;
}
