// Argument validation shared by every entry point. The first failed check is kept, with a
// message naming the function and the argument; no kernel runs after a failure.
#pragma once

#include "fsattn/fsattn.h"

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>

namespace fsattn {

// The integer a C caller stored in an enum-typed argument. Any int may arrive from C; in C++
// reading an enum object that holds a value outside its enumerators is undefined, so the
// value is read as the int it is.
template <typename Enum>
int enum_value(const Enum &e) {
  static_assert(sizeof(Enum) == sizeof(int), "C enums are int-sized");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

class Validator {
 public:
  explicit Validator(const char *function) : fn_(function) {}

  bool ok() const { return status_ == FSATTN_OK; }
  fsattn_status status() const { return status_; }

  Validator &pointer(const char *name, const void *p);
  // p a multiple of `bytes` (a kernel loads its elements as vectors of that size).
  Validator &aligned(const char *name, const void *p, int bytes);
  Validator &range(const char *name, int64_t value, int64_t lo, int64_t hi);
  Validator &finite(const char *name, double value);
  // The tensor's element count and byte size must be representable.
  Validator &elements(const char *name, std::initializer_list<int64_t> extents);
  Validator &fail(fsattn_status status, const std::string &message);

  // exec: present, a known device, a device this build serves.
  Validator &exec(const fsattn_exec *exec);
  // Whether exec() named CUDA: the call's pointers are device memory, not for the host to read.
  bool cuda() const { return cuda_; }
  // dims: present, sizes in range; cu_seqlens, where given (and varlen_ok), consistent.
  Validator &dims(const fsattn_dims *dims, bool varlen_ok = true);

 private:
  const char *fn_;
  fsattn_status status_ = FSATTN_OK;
  bool cuda_ = false;
};

// The batch of a call's states: dims->batch, or num_seqs with cu_seqlens.
inline int64_t state_batch(const fsattn_dims *dims) {
  return dims->cu_seqlens != nullptr ? dims->num_seqs : dims->batch;
}

// A decoding step's dims: one token per sequence.
void check_one_token(Validator &val, const fsattn_dims *dims);

}  // namespace fsattn
