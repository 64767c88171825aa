#include "validate.h"

#include "status.h"

#include <cmath>
#include <limits>

namespace fsattn {

Validator &Validator::fail(fsattn_status status, const std::string &message) {
  if (ok()) status_ = fsattn::fail(status, std::string(fn_) + ": " + message);
  return *this;
}

Validator &Validator::pointer(const char *name, const void *p) {
  if (ok() && p == nullptr) fail(FSATTN_ERROR_INVALID_ARGUMENT, std::string(name) + " is NULL");
  return *this;
}

Validator &Validator::aligned(const char *name, const void *p, int bytes) {
  if (ok() && reinterpret_cast<uintptr_t>(p) % uintptr_t(bytes) != 0) {
    fail(FSATTN_ERROR_INVALID_ARGUMENT,
         std::string(name) + " is not " + std::to_string(bytes) + "-byte aligned" + (cuda_ ? " (CUDA)" : ""));
  }
  return *this;
}

Validator &Validator::range(const char *name, int64_t value, int64_t lo, int64_t hi) {
  if (ok() && (value < lo || value > hi)) {
    fail(FSATTN_ERROR_INVALID_ARGUMENT, std::string(name) + " = " + std::to_string(value) + " is outside [" +
                                            std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return *this;
}

Validator &Validator::finite(const char *name, double value) {
  if (ok() && !std::isfinite(value)) {
    fail(FSATTN_ERROR_INVALID_ARGUMENT, std::string(name) + " is not finite");
  }
  return *this;
}

Validator &Validator::elements(const char *name, std::initializer_list<int64_t> extents) {
  if (!ok()) return *this;
  int64_t count = 1;
  for (int64_t e : extents) {
    if (__builtin_mul_overflow(count, e, &count)) {
      return fail(FSATTN_ERROR_INVALID_ARGUMENT, std::string(name) + ": the element count overflows 64 bits");
    }
  }
  constexpr int64_t kMaxBytes = std::numeric_limits<int64_t>::max() / 8;  // room for workspaces
  if (count > kMaxBytes / int64_t(sizeof(float))) {
    fail(FSATTN_ERROR_INVALID_ARGUMENT,
         std::string(name) + ": " + std::to_string(count) + " elements exceed the address space");
  }
  return *this;
}

Validator &Validator::exec(const fsattn_exec *e) {
  pointer("exec", e);
  if (!ok()) return *this;
  const int device = enum_value(e->device);
  if (device == FSATTN_DEVICE_CUDA) {
#ifdef FSATTN_HAS_CUDA
    cuda_ = true;
    return *this;
#else
    return fail(FSATTN_ERROR_UNSUPPORTED, "this build has no CUDA kernels (exec->device = CUDA)");
#endif
  }
  if (device != FSATTN_DEVICE_CPU) {
    fail(FSATTN_ERROR_INVALID_ARGUMENT, "exec->device = " + std::to_string(device) + " is not a fsattn_device");
  }
  return *this;
}

Validator &Validator::dims(const fsattn_dims *d, bool varlen_ok) {
  pointer("dims", d);
  if (!ok()) return *this;
  constexpr int64_t kInt32 = std::numeric_limits<int32_t>::max();
  range("dims->batch", d->batch, 1, kInt32);
  range("dims->seqlen", d->seqlen, 1, kInt32);
  range("dims->heads", d->heads, 1, FSATTN_MAX_HEADS);
  range("dims->dk", d->dk, 1, FSATTN_MAX_FEATURE);
  range("dims->dv", d->dv, 1, FSATTN_MAX_FEATURE);
  if (!ok() || d->cu_seqlens == nullptr) return *this;
  if (!varlen_ok) {
    return fail(FSATTN_ERROR_UNSUPPORTED, "variable-length batches (dims->cu_seqlens) are not supported here");
  }
  // The FlashAttention convention (cu_seqlens is host memory, also for CUDA calls): batch 1, sequences concatenated
  // along seqlen, cu_seqlens[0] = 0 <= ... <= cu_seqlens[num_seqs] = seqlen (empty sequences allowed).
  range("dims->batch (with cu_seqlens)", d->batch, 1, 1);
  range("dims->num_seqs", d->num_seqs, 1, kInt32);
  if (!ok()) return *this;
  const int64_t *cu = d->cu_seqlens;
  if (cu[0] != 0)
    return fail(FSATTN_ERROR_INVALID_ARGUMENT, "dims->cu_seqlens[0] = " + std::to_string(cu[0]) + " must be 0");
  for (int64_t s = 0; s < d->num_seqs; ++s) {
    if (cu[s + 1] < cu[s]) {
      return fail(FSATTN_ERROR_INVALID_ARGUMENT, "dims->cu_seqlens must not decrease: cu_seqlens[" +
                                                     std::to_string(s + 1) + "] = " + std::to_string(cu[s + 1]) +
                                                     " < cu_seqlens[" + std::to_string(s) +
                                                     "] = " + std::to_string(cu[s]));
    }
  }
  if (cu[d->num_seqs] != d->seqlen) {
    return fail(FSATTN_ERROR_INVALID_ARGUMENT, "dims->cu_seqlens[num_seqs] = " + std::to_string(cu[d->num_seqs]) +
                                                   " must equal dims->seqlen = " + std::to_string(d->seqlen));
  }
  return *this;
}

void check_one_token(Validator &val, const fsattn_dims *dims) {
  if (val.ok() && dims->seqlen != 1) {
    val.fail(FSATTN_ERROR_INVALID_ARGUMENT,
             "dims->seqlen = " + std::to_string(dims->seqlen) + ": a step takes one token per sequence (1)");
  }
}

}  // namespace fsattn
