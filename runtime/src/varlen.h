// Variable-length batches (dims->cu_seqlens, the FlashAttention convention): batch 1, the
// sequences concatenated along seqlen, one initial and final state per sequence. Each
// sequence runs as a dense call of batch 1 over its slice of the tokens and its own states.
#pragma once

#include "calls.h"
#include "fsattn/fsattn.h"
#include "layout.h"

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

// Where a variable-length call's memory is: the host's (CPU), or the CUDA device's of a call
// on exec->stream, where copies, fills and the parameter gradients' sums are queued.
struct VarlenMemory {
  bool cuda = false;
  void *context = nullptr, *stream = nullptr;  // the CUDA call's (CudaTarget)
  const fsattn_exec *exec = nullptr;
};
// One of a variable-length call's buffers, whole: `floats` floats from `ptr` (NULL: none).
struct VarlenBuffer {
  const char *name;
  const void *ptr;
  size_t floats;
};
// The sizes both mixers' buffers take: each activation's span (layout.h), states `nk` or
// `nv` floats per sequence, N sequences.
struct VarlenSizes {
  VarlenSizes(const fsattn_dims *dims, const CallLayout &l, size_t nk, size_t nv);
  size_t q, k, v, o, d_o, dq, dk, dv, N, nk, nv;
};
// Sequence s's slice of an activation with strides `st` (its first token).
template <typename T>
T *tokens(T *p, const Sequence &s, const Strides &st) {
  return p + s.first * st.token;
}
// A whole activation of a variable-length call, [1, T, H, D] (to fill on failure).
inline Tensor all_tokens(const float *p, const Strides &st, const fsattn_dims *dims, int64_t D) {
  return activation(p, st, D, dims->heads, dims->seqlen, 1);
}
// The buffers a forward pass of either mixer reads and writes, besides its parameters.
std::vector<VarlenBuffer> forward_buffers(const VarlenSizes &z, const float *q, const float *k, const float *v,
                                          const float *state_k_in, const float *state_v_in, const float *o,
                                          const float *state_k_out, const float *state_v_out);
// The same for a backward pass, besides its parameters and their gradients.
std::vector<VarlenBuffer> backward_buffers(const VarlenSizes &z, const float *q, const float *k, const float *v,
                                           const float *state_k_in, const float *state_v_in, const float *d_o,
                                           const float *d_state_k_out, const float *d_state_v_out, const float *dq,
                                           const float *dk, const float *dv, const float *d_state_k_in,
                                           const float *d_state_v_in);
// The memory of a variable-length call on exec's device (FSATTN_ERROR_DEVICE without a GPU).
// On CUDA every buffer of the call is checked first, whole, as a dense call checks its
// own: the per-sequence calls check only their slices, and an empty sequence's states are
// copied or zeroed with no call at all.
fsattn_status varlen_memory(const char *function, const fsattn_exec *exec, const std::vector<VarlenBuffer> &buffers,
                            VarlenMemory *mem);

// Sequence `s`'s slice of a per-sequence tensor of `n` floats each (NULL stays NULL).
template <typename T>
T *slice(T *p, int64_t s, size_t n) {
  return p != nullptr ? p + size_t(s) * n : nullptr;
}

// An input the call overwrites (an initial state under its final state), `total` floats: on
// the host read from `copy` instead, kept to restore it if the call fails. On CUDA the
// per-sequence calls take it in place (a failed call leaves NaN there, as a dense one does).
const float *stable_input(const VarlenMemory &mem, const float *in, const float *out, size_t total,
                          std::vector<float> &copy);
// The state after an empty sequence: `in`, or zero when `in` is NULL (`out` NULL: nothing).
void pass_through(const VarlenMemory &mem, float *out, const float *in, size_t n);
// After a failed call: `out` (n floats, if not NULL) set to `restore` when given, else NaN;
// or each element of an activation NaN.
void poison(const VarlenMemory &mem, float *out, size_t n, const float *restore = nullptr);
void poison(const VarlenMemory &mem, const Tensor &out);

// A forward pass over a variable-length batch, one dense call per sequence:
// run(dims_s, s, state_k_in_s, state_v_in_s, state_k_out_s, state_v_out_s). nk, nv: one
// sequence's state sizes; o_all: the whole o. If a call fails, o is NaN and the final states are
// NaN, or restored where they were written over their initial states.
template <typename Run>
fsattn_status forward_by_sequence(const VarlenMemory &mem, const fsattn_dims *dims, size_t nk, size_t nv,
                                  const Tensor &o_all, const float *state_k_in, const float *state_v_in,
                                  float *state_k_out, float *state_v_out, Run run) {
  const size_t seqs = size_t(dims->num_seqs);
  {
    CheckOnly check;  // every sequence's call checked before any is run
    for (const Sequence &s : sequences(dims)) {
      if (s.len == 0) continue;
      const fsattn_status status =
          run(sequence_dims(dims, s.len), s, slice(state_k_in, s.index, nk), slice(state_v_in, s.index, nv),
              slice(state_k_out, s.index, nk), slice(state_v_out, s.index, nv));
      if (status != FSATTN_OK) return status;
    }
  }
  std::vector<float> copies[2];
  const float *ski = stable_input(mem, state_k_in, state_k_out, seqs * nk, copies[0]);
  const float *svi = stable_input(mem, state_v_in, state_v_out, seqs * nv, copies[1]);
  for (const Sequence &s : sequences(dims)) {
    if (s.len == 0) {
      pass_through(mem, slice(state_k_out, s.index, nk), slice(ski, s.index, nk), nk);
      pass_through(mem, slice(state_v_out, s.index, nv), slice(svi, s.index, nv), nv);
      continue;
    }
    const fsattn_dims d = sequence_dims(dims, s.len);
    const fsattn_status status = run(d, s, slice(ski, s.index, nk), slice(svi, s.index, nv),
                                     slice(state_k_out, s.index, nk), slice(state_v_out, s.index, nv));
    if (status != FSATTN_OK) {
      poison(mem, o_all);
      poison(mem, state_k_out, seqs * nk, restore_of(copies[0]));
      poison(mem, state_v_out, seqs * nv, restore_of(copies[1]));
      return status;
    }
  }
  return FSATTN_OK;
}

// A parameter's gradient over a variable-length batch (`out`, n floats, or NULL: not
// wanted): each sequence's call writes part_data(), and add() adds it up, in sequence order:
// on the host in double, on CUDA in float with the gradient_sum kernel on the call's stream.
class SummedGradient {
 public:
  SummedGradient(const VarlenMemory &mem, float *out, size_t n) : mem_(mem), out_(out), n_(out != nullptr ? n : 0) {}
  SummedGradient(const SummedGradient &o) : SummedGradient(o.mem_, o.out_, o.n_) {}
  SummedGradient &operator=(const SummedGradient &) = delete;
  ~SummedGradient();

  float *out() const { return out_; }
  size_t size() const { return n_; }
  // Where a sequence's call writes its gradient (NULL when not wanted); prepare() first.
  float *part_data() const { return part_; }
  fsattn_status prepare(const char *function);
  fsattn_status add(const char *function);
  // The sum into `out` (zero when no sequence was added).
  void finish();

 private:
  VarlenMemory mem_;
  float *out_;
  size_t n_;
  float *part_ = nullptr;
  std::vector<float> host_part_;
  std::vector<double> total_;
  size_t added_ = 0;
};

// A backward pass's arguments over a variable-length batch, beyond the per-op inputs.
struct VarlenBackward {
  size_t nk, nv;  // one sequence's state sizes
  const float *state_k_in, *state_v_in, *d_state_k_out, *d_state_v_out;
  float *d_state_k_in, *d_state_v_in;
  std::vector<Tensor> token_grads;  // dq, dk, dv, whole
  std::vector<SummedGradient> params;
};

// A backward pass over a variable-length batch, one dense call per sequence:
// run(dims_s, s, state_k_in_s, state_v_in_s, d_state_k_out_s, d_state_v_out_s,
// d_state_k_in_s, d_state_v_in_s), the parameters' gradients going to b.params' parts
// (prepared before run is first called). If a call fails, every gradient is NaN, or restored
// where it was written over an input.
template <typename Run>
fsattn_status backward_by_sequence(const VarlenMemory &mem, const char *function, const fsattn_dims *dims,
                                   VarlenBackward &b, Run run) {
  const size_t seqs = size_t(dims->num_seqs), nk = b.nk, nv = b.nv;
  std::vector<float> states[2], seeds[2];
  const float *ski = stable_input(mem, b.state_k_in, b.d_state_k_in, seqs * nk, states[0]);
  const float *svi = stable_input(mem, b.state_v_in, b.d_state_v_in, seqs * nv, states[1]);
  const float *dsk = stable_input(mem, b.d_state_k_out, b.d_state_k_in, seqs * nk, seeds[0]);
  const float *dsv = stable_input(mem, b.d_state_v_out, b.d_state_v_in, seqs * nv, seeds[1]);
  auto failed = [&](fsattn_status status) {
    for (const Tensor &g : b.token_grads) poison(mem, g);
    for (SummedGradient &g : b.params) poison(mem, g.out(), g.size());
    poison(mem, b.d_state_k_in, seqs * nk, restore_of(seeds[0], states[0]));
    poison(mem, b.d_state_v_in, seqs * nv, restore_of(seeds[1], states[1]));
    return status;
  };
  for (SummedGradient &g : b.params) {
    if (const fsattn_status status = g.prepare(function); status != FSATTN_OK) return failed(status);
  }
  {
    CheckOnly check;  // every sequence's call checked before any is run
    for (const Sequence &s : sequences(dims)) {
      if (s.len == 0) continue;
      const fsattn_status status =
          run(sequence_dims(dims, s.len), s, slice(ski, s.index, nk), slice(svi, s.index, nv), slice(dsk, s.index, nk),
              slice(dsv, s.index, nv), slice(b.d_state_k_in, s.index, nk), slice(b.d_state_v_in, s.index, nv));
      if (status != FSATTN_OK) return status;
    }
  }
  for (const Sequence &s : sequences(dims)) {
    float *dski = slice(b.d_state_k_in, s.index, nk), *dsvi = slice(b.d_state_v_in, s.index, nv);
    if (s.len == 0) {
      pass_through(mem, dski, slice(dsk, s.index, nk), nk);
      pass_through(mem, dsvi, slice(dsv, s.index, nv), nv);
      continue;
    }
    const fsattn_dims d = sequence_dims(dims, s.len);
    fsattn_status status = run(d, s, slice(ski, s.index, nk), slice(svi, s.index, nv), slice(dsk, s.index, nk),
                               slice(dsv, s.index, nv), dski, dsvi);
    for (SummedGradient &g : b.params) {
      if (status == FSATTN_OK) status = g.add(function);
    }
    if (status != FSATTN_OK) return failed(status);
  }
  for (SummedGradient &g : b.params) g.finish();
  return FSATTN_OK;
}

}  // namespace fsattn
