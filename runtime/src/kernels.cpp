#include "kernels.h"

#include "status.h"

#include <cstring>
#include <string>

#include "kernel_headers.inc"

namespace fsattn {

namespace {

[[maybe_unused]] constexpr fsattn_op op_ida_forward = FSATTN_OP_IDA_FORWARD;
[[maybe_unused]] constexpr fsattn_op op_ida_backward = FSATTN_OP_IDA_BACKWARD;
[[maybe_unused]] constexpr fsattn_op op_bla_forward = FSATTN_OP_BLA_FORWARD;
[[maybe_unused]] constexpr fsattn_op op_bla_backward = FSATTN_OP_BLA_BACKWARD;
[[maybe_unused]] constexpr fsattn_device device_cpu = FSATTN_DEVICE_CPU;
[[maybe_unused]] constexpr fsattn_device device_cuda = FSATTN_DEVICE_CUDA;

#define FSATTN_KERNEL(OP, DEVICE, VARIANT, SCHEDULE, CHUNK)                                   \
  Kernel{op_##OP, device_##DEVICE, #VARIANT, #SCHEDULE, CHUNK, fsattn_##OP##__##VARIANT##_argv, \
         "fsattn_" #OP "__" #VARIANT},
const Kernel kTable[] = {
#include "kernel_table.inc"
};
#undef FSATTN_KERNEL

const char *op_name(fsattn_op op) {
  switch (op) {
    case FSATTN_OP_IDA_FORWARD: return "ida_forward";
    case FSATTN_OP_IDA_BACKWARD: return "ida_backward";
    case FSATTN_OP_BLA_FORWARD: return "bla_forward";
    case FSATTN_OP_BLA_BACKWARD: return "bla_backward";
  }
  return "unknown op";
}

}  // namespace

const Kernel *find_kernel(const char *function, fsattn_op op, fsattn_device device, const char *variant,
                          fsattn_status *status) {
  const char *dev = device == FSATTN_DEVICE_CUDA ? "CUDA" : "CPU";
  bool any = false;
  for (const Kernel &k : kTable) {
    if (k.op != op || k.device != device) continue;
    any = true;
    if (variant == nullptr || std::strcmp(variant, k.variant) == 0) return &k;
  }
  if (!any) {
    *status = fail(FSATTN_ERROR_UNSUPPORTED,
                   std::string(function) + ": this build has no " + dev + " kernel for it");
  } else {
    *status = fail(FSATTN_ERROR_INVALID_ARGUMENT, std::string(function) + ": exec->variant: '" + variant +
                                                      "' is not a compiled " + dev + " variant of " +
                                                      op_name(op) + " (see fsattn_variant_name)");
  }
  return nullptr;
}

}  // namespace fsattn

extern "C" int fsattn_variant_count(fsattn_op op, fsattn_device device) {
  int n = 0;
  for (const fsattn::Kernel &k : fsattn::kTable) n += (k.op == op && k.device == device);
  return n;
}

extern "C" const char *fsattn_variant_name(fsattn_op op, fsattn_device device, int index) {
  for (const fsattn::Kernel &k : fsattn::kTable) {
    if (k.op == op && k.device == device && index-- == 0) return k.variant;
  }
  return nullptr;
}
