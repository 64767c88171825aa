// Variable-length batches (dims->cu_seqlens, the FlashAttention convention): batch 1, the
// sequences concatenated along seqlen, one initial and final state per sequence. Each
// sequence runs as a dense call of batch 1 over its slice of the tokens and its own states.
#pragma once

#include "calls.h"
#include "fsattn/fsattn.h"

#include <cstddef>
#include <cstdint>
#include <utility>
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

// A forward pass over a variable-length batch, one dense call per sequence:
// run(dims_s, s, state_k_in_s, state_v_in_s, state_k_out_s, state_v_out_s). nk, nv: one
// sequence's state sizes; o_size: o's. If a call fails, o is NaN and the final states are
// NaN, or restored where they were written over their initial states.
template <typename Run>
fsattn_status forward_by_sequence(const fsattn_dims *dims, size_t nk, size_t nv, size_t o_size,
                                  const float *state_k_in, const float *state_v_in, float *o, float *state_k_out,
                                  float *state_v_out, Run run) {
  const size_t seqs = size_t(dims->num_seqs);
  std::vector<float> copies[2];
  const float *ski = stable_input(state_k_in, state_k_out, seqs * nk, copies[0]);
  const float *svi = stable_input(state_v_in, state_v_out, seqs * nv, copies[1]);
  for (const Sequence &s : sequences(dims)) {
    if (s.len == 0) {
      pass_through(slice(state_k_out, s.index, nk), slice(ski, s.index, nk), nk);
      pass_through(slice(state_v_out, s.index, nv), slice(svi, s.index, nv), nv);
      continue;
    }
    const fsattn_dims d = sequence_dims(dims, s.len);
    const fsattn_status status = run(d, s, slice(ski, s.index, nk), slice(svi, s.index, nv),
                                     slice(state_k_out, s.index, nk), slice(state_v_out, s.index, nv));
    if (status != FSATTN_OK) {
      poison(o, o_size);
      poison(state_k_out, seqs * nk, restore_of(copies[0]));
      poison(state_v_out, seqs * nv, restore_of(copies[1]));
      return status;
    }
  }
  return FSATTN_OK;
}

// A parameter's gradient over a variable-length batch (`out`, n floats, or NULL: not
// wanted): each sequence's call writes `part`, added up here in double, in order.
struct SummedGradient {
  float *out;
  std::vector<float> part;
  std::vector<double> total;
  SummedGradient(float *out_, size_t n) : out(out_), part(out_ ? n : 0), total(out_ ? n : 0, 0.0) {}
  float *part_data() { return out != nullptr ? part.data() : nullptr; }
  void add() {
    for (size_t i = 0; i < part.size(); ++i) total[i] += part[i];
  }
};

// A backward pass's arguments over a variable-length batch, beyond the per-op inputs.
struct VarlenBackward {
  size_t nk, nv;  // one sequence's state sizes
  const float *state_k_in, *state_v_in, *d_state_k_out, *d_state_v_out;
  float *d_state_k_in, *d_state_v_in;
  std::vector<std::pair<float *, size_t>> token_grads;  // dq, dk, dv with their sizes
  std::vector<SummedGradient> params;
};

// A backward pass over a variable-length batch, one dense call per sequence:
// run(dims_s, s, state_k_in_s, state_v_in_s, d_state_k_out_s, d_state_v_out_s,
// d_state_k_in_s, d_state_v_in_s), the parameters' gradients going to b.params' parts. If a
// call fails, every gradient is NaN, or restored where it was written over an input.
template <typename Run>
fsattn_status backward_by_sequence(const fsattn_dims *dims, VarlenBackward &b, Run run) {
  const size_t seqs = size_t(dims->num_seqs), nk = b.nk, nv = b.nv;
  std::vector<float> states[2], seeds[2];
  const float *ski = stable_input(b.state_k_in, b.d_state_k_in, seqs * nk, states[0]);
  const float *svi = stable_input(b.state_v_in, b.d_state_v_in, seqs * nv, states[1]);
  const float *dsk = stable_input(b.d_state_k_out, b.d_state_k_in, seqs * nk, seeds[0]);
  const float *dsv = stable_input(b.d_state_v_out, b.d_state_v_in, seqs * nv, seeds[1]);
  for (const Sequence &s : sequences(dims)) {
    float *dski = slice(b.d_state_k_in, s.index, nk), *dsvi = slice(b.d_state_v_in, s.index, nv);
    if (s.len == 0) {
      pass_through(dski, slice(dsk, s.index, nk), nk);
      pass_through(dsvi, slice(dsv, s.index, nv), nv);
      continue;
    }
    const fsattn_dims d = sequence_dims(dims, s.len);
    const fsattn_status status = run(d, s, slice(ski, s.index, nk), slice(svi, s.index, nv), slice(dsk, s.index, nk),
                                     slice(dsv, s.index, nv), dski, dsvi);
    if (status != FSATTN_OK) {
      for (auto [g, n] : b.token_grads) poison(g, n);
      for (SummedGradient &g : b.params) poison(g.out, g.part.size());
      poison(b.d_state_k_in, seqs * nk, restore_of(seeds[0], states[0]));
      poison(b.d_state_v_in, seqs * nv, restore_of(seeds[1], states[1]));
      return status;
    }
    for (SummedGradient &g : b.params) g.add();
  }
  for (SummedGradient &g : b.params) {
    for (size_t i = 0; i < g.total.size(); ++i) g.out[i] = float(g.total[i]);
  }
  return FSATTN_OK;
}

}  // namespace fsattn
