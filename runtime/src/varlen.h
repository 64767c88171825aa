// Variable-length batches (dims->cu_seqlens, the FlashAttention convention): batch 1, the
// sequences concatenated along seqlen, one initial and final state per sequence. Each
// sequence runs as a dense call of batch 1 over its slice of the tokens and its own states.
#pragma once

#include "fsattn/fsattn.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fsattn {

struct Sequence {
  int64_t index, first, len;  // sequence `index` holds tokens [first, first + len)
};
std::vector<Sequence> sequences(const fsattn_dims *dims);
// The dense dims of one sequence.
fsattn_dims sequence_dims(const fsattn_dims *dims, int64_t len);

// Sequence `s`'s slice of a per-sequence tensor of `n` floats each (NULL stays NULL).
template <typename T>
T *slice(T *p, int64_t s, size_t n) {
  return p != nullptr ? p + size_t(s) * n : nullptr;
}

// An input the call overwrites (an initial state under its final state), `total` floats:
// read from `copy` instead, kept to restore it if the call fails.
const float *stable_input(const float *in, const float *out, size_t total, std::vector<float> &copy);
// The state after an empty sequence: `in`, or zero when `in` is NULL (`out` NULL: nothing).
void pass_through(float *out, const float *in, size_t n);
// After a failed call: `out` (n floats, if not NULL) set to `restore` when given, else NaN.
void poison(float *out, size_t n, const float *restore = nullptr);

}  // namespace fsattn
