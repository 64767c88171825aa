#include "kernels.h"

#include "generators/baseline_shape.h"
#include "status.h"
#include "tuning.h"
#include "validate.h"

#include <cpuid.h>

#include <cstring>
#include <string>

#include "kernel_headers.inc"

namespace fsattn {

namespace {

[[maybe_unused]] constexpr fsattn_op op_ida_forward = FSATTN_OP_IDA_FORWARD;
[[maybe_unused]] constexpr fsattn_op op_ida_backward = FSATTN_OP_IDA_BACKWARD;
[[maybe_unused]] constexpr fsattn_op op_bla_forward = FSATTN_OP_BLA_FORWARD;
[[maybe_unused]] constexpr fsattn_op op_bla_backward = FSATTN_OP_BLA_BACKWARD;
[[maybe_unused]] constexpr fsattn_op op_bla_interpolate = FSATTN_OP_BLA_INTERPOLATE;
[[maybe_unused]] constexpr fsattn_op op_ida_step = FSATTN_OP_IDA_STEP;
[[maybe_unused]] constexpr fsattn_op op_bla_step = FSATTN_OP_BLA_STEP;
[[maybe_unused]] constexpr fsattn_device device_cpu = FSATTN_DEVICE_CPU;
[[maybe_unused]] constexpr fsattn_device device_cuda = FSATTN_DEVICE_CUDA;

#define FSATTN_KERNEL(OP, DEVICE, VARIANT, SCHEDULE, CHUNK, REGISTERS) \
  Kernel{op_##OP,                                                      \
         device_##DEVICE,                                              \
         #VARIANT,                                                     \
         #SCHEDULE,                                                    \
         CHUNK,                                                        \
         REGISTERS,                                                    \
         fsattn_##OP##__##VARIANT##_argv,                              \
         fsattn_##OP##__##VARIANT##_metadata,                          \
         "fsattn_" #OP "__" #VARIANT},
const Kernel kTable[] = {
#include "kernel_table.inc"
};
#undef FSATTN_KERNEL

// F16C from CPUID leaf 1 (clang's __builtin_cpu_supports does not know it).
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
}

// Whether this CPU has every feature of one Halide target string ("x86-64-linux-avx-avx2-...").
bool cpu_runs(const std::string &target) {
  struct Feature {
    const char *halide;
    bool present;
  };
  __builtin_cpu_init();
  const Feature features[] = {
      {"-sse41", bool(__builtin_cpu_supports("sse4.1"))},
      {"-avx-", bool(__builtin_cpu_supports("avx"))},
      {"-avx2", bool(__builtin_cpu_supports("avx2"))},
      {"-fma", bool(__builtin_cpu_supports("fma"))},
      {"-f16c", has_f16c()},
      {"-avx512", bool(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd"))},
      {"-avx512_skylake", bool(__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                               __builtin_cpu_supports("avx512vl"))},
  };
  const std::string t = target + "-";
  for (const Feature &f : features) {
    if (!f.present && t.find(f.halide) != std::string::npos) return false;
  }
  return true;
}

// A multi-target kernel runs if any of its targets does (the last is the baseline).
bool cpu_runs_any(const char *targets) {
  std::string list(targets);
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    if (cpu_runs(list.substr(start, end - start))) return true;
    start = end + 1;
  }
  return false;
}

constexpr fsattn_op kOps[] = {FSATTN_OP_IDA_FORWARD,  FSATTN_OP_IDA_BACKWARD,    FSATTN_OP_BLA_FORWARD,
                              FSATTN_OP_BLA_BACKWARD, FSATTN_OP_BLA_INTERPOLATE, FSATTN_OP_IDA_STEP,
                              FSATTN_OP_BLA_STEP};

}  // namespace

const char *op_name(fsattn_op op) {
  switch (op) {
    case FSATTN_OP_IDA_FORWARD: return "ida_forward";
    case FSATTN_OP_IDA_BACKWARD: return "ida_backward";
    case FSATTN_OP_BLA_FORWARD: return "bla_forward";
    case FSATTN_OP_BLA_BACKWARD: return "bla_backward";
    case FSATTN_OP_BLA_INTERPOLATE: return "bla_interpolate";
    case FSATTN_OP_IDA_STEP: return "ida_step";
    case FSATTN_OP_BLA_STEP: return "bla_step";
  }
  return "unknown op";
}

bool parse_op(const std::string &name, fsattn_op *op) {
  for (fsattn_op o : kOps) {
    if (name == op_name(o)) return *op = o, true;
  }
  return false;
}

bool kernel_runs_here(const Kernel &k) { return k.device != FSATTN_DEVICE_CPU || cpu_runs_any(k.metadata()->target); }

const Kernel *compiled_kernel(fsattn_op op, fsattn_device device, const char *variant) {
  for (const Kernel &k : kTable) {
    if (k.op == op && k.device == device && std::strcmp(variant, k.variant) == 0) return &k;
  }
  return nullptr;
}

const Kernel *find_kernel(const char *function, fsattn_op op, fsattn_device device, const char *variant,
                          const CallShape &shape, fsattn_status *status) {
  if (variant == nullptr) {
    if (const Kernel *tuned = tuned_kernel(op, device, shape)) return tuned;
  }
  const char *dev = device == FSATTN_DEVICE_CUDA ? "CUDA" : "CPU";
  bool any = false;
  for (const Kernel &k : kTable) {
    if (k.op != op || k.device != device) continue;
    any = true;
    if (variant != nullptr && std::strcmp(variant, k.variant) != 0) continue;
    if (!kernel_runs_here(k)) {
      *status = fail(FSATTN_ERROR_UNSUPPORTED, std::string(function) + ": variant " + k.variant + " was compiled for " +
                                                   k.metadata()->target + ", which this CPU cannot run");
      return nullptr;
    }
    if (std::strcmp(k.schedule, "hand") != 0 && (shape.heads != baseline::kH || shape.dk != baseline::kD ||
                                                 shape.dv != baseline::kD || shape.features != baseline::kFeatures)) {
      *status = fail(FSATTN_ERROR_UNSUPPORTED,
                     std::string(function) + ": variant " + k.variant +
                         " is an autoscheduled baseline, compiled for heads = " + std::to_string(baseline::kH) +
                         ", dk = dv = " + std::to_string(baseline::kD) + " and " + std::to_string(baseline::kFeatures) +
                         " modes or slots only");
      return nullptr;
    }
    return &k;
  }
  if (!any) {
    *status = fail(FSATTN_ERROR_UNSUPPORTED, std::string(function) + ": this build has no " + dev + " kernel for it");
  } else {
    *status = fail(FSATTN_ERROR_INVALID_ARGUMENT, std::string(function) + ": exec->variant: '" + variant +
                                                      "' is not a compiled " + dev + " variant of " + op_name(op) +
                                                      " (see fsattn_variant_name)");
  }
  return nullptr;
}

fsattn_status check_cuda_grid(const char *function, const Kernel &k, const fsattn_dims *dims) {
  if (k.device != FSATTN_DEVICE_CUDA) return FSATTN_OK;
  constexpr int64_t kMaxGrid = 65535;
  if (k.chunk == 0) {  // a decoding step: heads and sequences along the grid
    if (dims->heads <= kMaxGrid && dims->batch <= kMaxGrid) return FSATTN_OK;
    return fail(FSATTN_ERROR_UNSUPPORTED, std::string(function) +
                                              ": on CUDA a step takes at most 65535 heads and 65535 sequences: split "
                                              "the heads or the sequences into several calls");
  }
  const int64_t chunks = (dims->seqlen + k.chunk - 1) / k.chunk;
  if (chunks > kMaxGrid || dims->heads > kMaxGrid || dims->batch > kMaxGrid) {
    return fail(FSATTN_ERROR_UNSUPPORTED,
                std::string(function) + ": on CUDA a call takes at most 65535 chunks of " + std::to_string(k.chunk) +
                    " tokens (dims->seqlen <= " + std::to_string(kMaxGrid * k.chunk) +
                    "), 65535 heads and 65535 batch elements: split the sequence into calls that pass the "
                    "state on, or the heads or the batch");
  }
  return FSATTN_OK;
}

}  // namespace fsattn

extern "C" const char *fsattn_op_name(fsattn_op op) {
  const int o = fsattn::enum_value(op);
  return o >= FSATTN_OP_IDA_FORWARD && o <= FSATTN_OP_BLA_STEP ? fsattn::op_name(op) : nullptr;
}

extern "C" int fsattn_variant_count(fsattn_op op, fsattn_device device) {
  const int o = fsattn::enum_value(op), d = fsattn::enum_value(device);
  int n = 0;
  for (const fsattn::Kernel &k : fsattn::kTable) n += (k.op == o && k.device == d);
  return n;
}

extern "C" const char *fsattn_variant_name(fsattn_op op, fsattn_device device, int index) {
  const int o = fsattn::enum_value(op), d = fsattn::enum_value(device);
  int seen = 0;
  for (const fsattn::Kernel &k : fsattn::kTable) {
    if (k.op == o && k.device == d && seen++ == index) return k.variant;
  }
  return nullptr;
}
