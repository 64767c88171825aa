#include "varlen.h"

#include <algorithm>
#include <cmath>

namespace fsattn {

std::vector<Sequence> sequences(const fsattn_dims *dims) {
  std::vector<Sequence> seqs;
  for (int64_t s = 0; s < dims->num_seqs; ++s) {
    seqs.push_back({s, dims->cu_seqlens[s], dims->cu_seqlens[s + 1] - dims->cu_seqlens[s]});
  }
  return seqs;
}

fsattn_dims sequence_dims(const fsattn_dims *dims, int64_t len) {
  return {1, len, dims->heads, dims->dk, dims->dv, nullptr, 0};
}

const float *stable_input(const float *in, const float *out, size_t total, std::vector<float> &copy) {
  if (in == nullptr || out == nullptr || !(in < out + total && out < in + total)) return in;
  copy.assign(in, in + total);
  return copy.data();
}

void pass_through(float *out, const float *in, size_t n) {
  if (out == nullptr) return;
  if (in != nullptr) {
    std::copy(in, in + n, out);
  } else {
    std::fill(out, out + n, 0.0f);
  }
}

void poison(float *out, size_t n, const float *restore) {
  if (out == nullptr) return;
  if (restore != nullptr) {
    std::copy(restore, restore + n, out);
  } else {
    std::fill(out, out + n, NAN);
  }
}

}  // namespace fsattn
