// fsattn_ida_*: validation, then the chosen IDA kernel.
#include "calls.h"
#include "kernels.h"
#include "status.h"
#include "validate.h"
#include "varlen.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

namespace fsattn {
namespace {

// Checks every IDA parameter; returns the eps to use.
float check_ida_params(Validator &val, const fsattn_ida_params *p) {
  val.pointer("p", p);
  if (!val.ok()) return 0;
  val.range("p->modes", p->modes, 1, FSATTN_MAX_FEATURE);
  if (std::isnan(p->eps) || std::isinf(p->eps)) val.finite("p->eps", p->eps);
  val.pointer("p->gk", p->gk).pointer("p->bk", p->bk).pointer("p->gv", p->gv).pointer("p->bv", p->bv);
  val.pointer("p->log_dt", p->log_dt).pointer("p->A_re_log", p->A_re_log).pointer("p->A_im", p->A_im);
  val.pointer("p->B", p->B).pointer("p->C", p->C);
  return p->eps > 0 ? p->eps : 1e-6f;
}

}  // namespace
}  // namespace fsattn

using namespace fsattn;

namespace {

// Everything the forward and the backward pass check alike; returns the eps to use.
float check_ida_call(Validator &val, const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_ida_params *p,
                     const float *q, const float *k, const float *v, bool varlen_ok = true) {
  val.exec(exec).dims(dims, varlen_ok);
  float eps = check_ida_params(val, p);
  val.pointer("q", q).pointer("k", k).pointer("v", v);
  if (!val.ok()) return eps;
  const int64_t B = dims->batch, T = dims->seqlen, H = dims->heads, Dk = dims->dk, Dv = dims->dv;
  const int64_t M = p->modes, NS = state_batch(dims);
  val.elements("q", {B, T, H, Dk}).elements("v", {B, T, H, Dv});
  val.elements("state_k", {NS, H, M, Dk, 2}).elements("state_v", {NS, H, M, Dv, 2});
  val.elements("p->C", {H, M, M, 2});
  return eps;
}

// The parameters as the kernels take them (shared by the batch).
void add_ida_params(KernelArgs &args, const fsattn_dims *dims, const fsattn_ida_params *p) {
  const int64_t H = dims->heads, Dk = dims->dk, Dv = dims->dv, M = p->modes;
  args.shared(Tensor(p->gk, {Dk, H})).shared(Tensor(p->bk, {Dk, H}));
  args.shared(Tensor(p->gv, {Dv, H})).shared(Tensor(p->bv, {Dv, H}));
  args.shared(Tensor(p->log_dt, {H})).shared(Tensor(p->A_re_log, {M, H})).shared(Tensor(p->A_im, {M, H}));
  args.shared(Tensor(p->B, {2, M, H})).shared(Tensor(p->C, {2, M, M, H}));
}

fsattn_status ida_forward(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_ida_params *p,
                          const float *q, const float *k, const float *v, const float *state_k_in,
                          const float *state_v_in, float *o, float *state_k_out, float *state_v_out);

// Each sequence of a variable-length batch as a dense call (varlen.h). If one fails, every
// output is NaN and states updated in place are restored.
fsattn_status ida_forward_varlen(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_ida_params *p,
                                 const float *q, const float *k, const float *v, const float *state_k_in,
                                 const float *state_v_in, float *o, float *state_k_out, float *state_v_out) {
  const int64_t H = dims->heads, Dk = dims->dk, Dv = dims->dv, M = p->modes;
  return forward_by_sequence(
      dims, size_t(2 * M * Dk * H), size_t(2 * M * Dv * H), size_t(dims->seqlen * H * Dv), state_k_in, state_v_in, o,
      state_k_out, state_v_out,
      [&](const fsattn_dims &d, const Sequence &s, const float *ski, const float *svi, float *sko, float *svo) {
        return ida_forward(exec, &d, p, q + s.first * H * Dk, k + s.first * H * Dk, v + s.first * H * Dv, ski, svi,
                           o + s.first * H * Dv, sko, svo);
      });
}

fsattn_status ida_forward(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_ida_params *p,
                          const float *q, const float *k, const float *v, const float *state_k_in,
                          const float *state_v_in, float *o, float *state_k_out, float *state_v_out) {
  Validator val("fsattn_ida_forward");
  float eps = check_ida_call(val, exec, dims, p, q, k, v);
  val.pointer("o", o);
  if (!val.ok()) return val.status();
  if (dims->cu_seqlens != nullptr) {
    return ida_forward_varlen(exec, dims, p, q, k, v, state_k_in, state_v_in, o, state_k_out, state_v_out);
  }

  fsattn_status status = FSATTN_OK;
  const Kernel *kernel = find_kernel("fsattn_ida_forward", FSATTN_OP_IDA_FORWARD, exec->device, exec->variant, &status);
  if (kernel == nullptr) return status;

  const int64_t B = dims->batch, T = dims->seqlen, H = dims->heads, Dk = dims->dk, Dv = dims->dv;
  const int64_t M = p->modes;
  std::vector<float> copies[2];  // initial states that overlap their final states
  KernelArgs args;
  args.batched(Tensor(q, {Dk, H, T, B})).batched(Tensor(k, {Dk, H, T, B})).batched(Tensor(v, {Dv, H, T, B}));
  add_ida_params(args, dims, p);
  args.batched(state_input(state_k_in, state_k_out, {2, Dk, M, H, B}, copies[0]));
  args.batched(state_input(state_v_in, state_v_out, {2, Dv, M, H, B}, copies[1]));
  args.scalar(&eps);
  args.output(Tensor(o, {Dv, H, T, B}));
  args.output(state_output(state_k_out, {2, Dk, M, H, B}), restore_of(copies[0]));
  args.output(state_output(state_v_out, {2, Dv, M, H, B}), restore_of(copies[1]));
  return args.run(*kernel, B);
}

fsattn_status ida_backward(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_ida_params *p,
                           const float *q, const float *k, const float *v, const float *state_k_in,
                           const float *state_v_in, const float *d_o, const float *d_state_k_out,
                           const float *d_state_v_out, float *dq, float *dk, float *dv, const fsattn_ida_grads *dp,
                           float *d_state_k_in, float *d_state_v_in);

// Each sequence as a dense call; the parameters' gradients summed over the sequences in
// double, in order.
fsattn_status ida_backward_varlen(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_ida_params *p,
                                  const float *q, const float *k, const float *v, const float *state_k_in,
                                  const float *state_v_in, const float *d_o, const float *d_state_k_out,
                                  const float *d_state_v_out, float *dq, float *dk, float *dv,
                                  const fsattn_ida_grads *dp, float *d_state_k_in, float *d_state_v_in) {
  const int64_t H = dims->heads, Dk = dims->dk, Dv = dims->dv, T = dims->seqlen, NS = dims->num_seqs, M = p->modes;
  const size_t nk = size_t(2 * M * Dk * H), nv = size_t(2 * M * Dv * H);
  std::vector<float> states[2], seeds[2];
  const float *ski = stable_input(state_k_in, d_state_k_in, NS * nk, states[0]);
  const float *svi = stable_input(state_v_in, d_state_v_in, NS * nv, states[1]);
  const float *dsk = stable_input(d_state_k_out, d_state_k_in, NS * nk, seeds[0]);
  const float *dsv = stable_input(d_state_v_out, d_state_v_in, NS * nv, seeds[1]);
  // Each parameter's gradient: the caller's pointer (or NULL), one sequence's share, the total.
  const fsattn_ida_grads none{};
  const fsattn_ida_grads &want = dp != nullptr ? *dp : none;
  struct Grad {
    float *out;
    std::vector<float> part;
    std::vector<double> total;
  };
  const size_t sizes[] = {size_t(H * Dk), size_t(H * Dk), size_t(H * Dv), size_t(H * Dv), size_t(H),
                          size_t(H * M),  size_t(H * M),  size_t(2 * H * M), size_t(2 * H * M * M)};
  float *outs[] = {want.gk, want.bk, want.gv, want.bv, want.log_dt, want.A_re_log, want.A_im, want.B, want.C};
  std::vector<Grad> grads;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    grads.push_back({outs[i], std::vector<float>(outs[i] ? sizes[i] : 0), std::vector<double>(outs[i] ? sizes[i] : 0)});
  }
  auto part = [&](size_t i) { return grads[i].out != nullptr ? grads[i].part.data() : nullptr; };
  const fsattn_ida_grads parts{part(0), part(1), part(2), part(3), part(4), part(5), part(6), part(7), part(8)};
  for (const Sequence &s : sequences(dims)) {
    if (s.len == 0) {
      pass_through(slice(d_state_k_in, s.index, nk), slice(dsk, s.index, nk), nk);
      pass_through(slice(d_state_v_in, s.index, nv), slice(dsv, s.index, nv), nv);
      continue;
    }
    const fsattn_dims d = sequence_dims(dims, s.len);
    const fsattn_status status = ida_backward(
        exec, &d, p, q + s.first * H * Dk, k + s.first * H * Dk, v + s.first * H * Dv, slice(ski, s.index, nk),
        slice(svi, s.index, nv), d_o + s.first * H * Dv, slice(dsk, s.index, nk), slice(dsv, s.index, nv),
        dq + s.first * H * Dk, dk + s.first * H * Dk, dv + s.first * H * Dv, &parts,
        slice(d_state_k_in, s.index, nk), slice(d_state_v_in, s.index, nv));
    if (status != FSATTN_OK) {
      for (float *g : {dq, dk}) poison(g, size_t(T * H * Dk));
      poison(dv, size_t(T * H * Dv));
      for (Grad &g : grads) poison(g.out, g.part.size());
      poison(d_state_k_in, NS * nk, seeds[0].empty() ? restore_of(states[0]) : restore_of(seeds[0]));
      poison(d_state_v_in, NS * nv, seeds[1].empty() ? restore_of(states[1]) : restore_of(seeds[1]));
      return status;
    }
    for (Grad &g : grads) {
      for (size_t i = 0; i < g.part.size(); ++i) g.total[i] += g.part[i];
    }
  }
  for (Grad &g : grads) {
    if (g.out != nullptr) std::copy(g.total.begin(), g.total.end(), g.out);
  }
  return FSATTN_OK;
}

fsattn_status ida_backward(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_ida_params *p,
                           const float *q, const float *k, const float *v, const float *state_k_in,
                           const float *state_v_in, const float *d_o, const float *d_state_k_out,
                           const float *d_state_v_out, float *dq, float *dk, float *dv, const fsattn_ida_grads *dp,
                           float *d_state_k_in, float *d_state_v_in) {
  Validator val("fsattn_ida_backward");
  float eps = check_ida_call(val, exec, dims, p, q, k, v);
  val.pointer("d_o", d_o).pointer("dq", dq).pointer("dk", dk).pointer("dv", dv);
  if (!val.ok()) return val.status();
  if (dims->cu_seqlens != nullptr) {
    return ida_backward_varlen(exec, dims, p, q, k, v, state_k_in, state_v_in, d_o, d_state_k_out, d_state_v_out, dq,
                               dk, dv, dp, d_state_k_in, d_state_v_in);
  }

  fsattn_status status = FSATTN_OK;
  const Kernel *kernel =
      find_kernel("fsattn_ida_backward", FSATTN_OP_IDA_BACKWARD, exec->device, exec->variant, &status);
  if (kernel == nullptr) return status;

  const int64_t B = dims->batch, T = dims->seqlen, H = dims->heads, Dk = dims->dk, Dv = dims->dv;
  const int64_t M = p->modes;
  // Initial states and final-state gradients that overlap the initial-state gradients written
  // over them are read from copies (and restored from them if the call fails).
  std::vector<float> state_copies[2], seed_copies[2];
  auto restore = [&](int i) {
    return seed_copies[i].empty() ? restore_of(state_copies[i]) : restore_of(seed_copies[i]);
  };
  // A NULL dp, or a NULL member, skips that gradient (a sink the kernel writes one value of).
  const fsattn_ida_grads none{};
  const fsattn_ida_grads &g = dp != nullptr ? *dp : none;
  KernelArgs args;
  args.batched(Tensor(q, {Dk, H, T, B})).batched(Tensor(k, {Dk, H, T, B})).batched(Tensor(v, {Dv, H, T, B}));
  add_ida_params(args, dims, p);
  args.batched(state_input(state_k_in, d_state_k_in, {2, Dk, M, H, B}, state_copies[0]));
  args.batched(state_input(state_v_in, d_state_v_in, {2, Dv, M, H, B}, state_copies[1]));
  args.batched(Tensor(d_o, {Dv, H, T, B}));
  args.batched(state_input(d_state_k_out, d_state_k_in, {2, Dk, M, H, B}, seed_copies[0]));
  args.batched(state_input(d_state_v_out, d_state_v_in, {2, Dv, M, H, B}, seed_copies[1]));
  args.scalar(&eps);
  args.output(Tensor(dq, {Dk, H, T, B})).output(Tensor(dk, {Dk, H, T, B})).output(Tensor(dv, {Dv, H, T, B}));
  args.summed(state_output(g.gk, {Dk, H})).summed(state_output(g.bk, {Dk, H}));
  args.summed(state_output(g.gv, {Dv, H})).summed(state_output(g.bv, {Dv, H}));
  args.summed(state_output(g.log_dt, {H}));
  args.summed(state_output(g.A_re_log, {M, H})).summed(state_output(g.A_im, {M, H}));
  args.summed(state_output(g.B, {2, M, H})).summed(state_output(g.C, {2, M, M, H}));
  args.output(state_output(d_state_k_in, {2, Dk, M, H, B}), restore(0));
  args.output(state_output(d_state_v_in, {2, Dv, M, H, B}), restore(1));
  return args.run(*kernel, B);
}

fsattn_status ida_step(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_ida_params *p,
                       const float *q, const float *k, const float *v, float *state_k, float *state_v, float *o) {
  Validator val("fsattn_ida_step");
  float eps = check_ida_call(val, exec, dims, p, q, k, v, /*varlen_ok=*/false);
  check_one_token(val, dims);
  val.pointer("state_k", state_k).pointer("state_v", state_v).pointer("o", o);
  if (!val.ok()) return val.status();

  fsattn_status status = FSATTN_OK;
  const Kernel *kernel = find_kernel("fsattn_ida_step", FSATTN_OP_IDA_STEP, exec->device, exec->variant, &status);
  if (kernel == nullptr) return status;

  const int64_t B = dims->batch, H = dims->heads, Dk = dims->dk, Dv = dims->dv, M = p->modes;
  // The kernel reads the old states for o, then writes the new ones in place (step.h).
  const Tensor sk(state_k, {2, Dk, M, H, B}), sv(state_v, {2, Dv, M, H, B});
  KernelArgs args;
  args.batched(Tensor(q, {Dk, H, 1, B})).batched(Tensor(k, {Dk, H, 1, B})).batched(Tensor(v, {Dv, H, 1, B}));
  add_ida_params(args, dims, p);
  args.batched(sk).batched(sv);
  args.scalar(&eps);
  args.output(Tensor(o, {Dv, H, 1, B}));
  args.in_place(sk).in_place(sv);
  return args.run(*kernel, B);
}

}  // namespace

extern "C" fsattn_status fsattn_ida_step(const fsattn_exec *exec, const fsattn_dims *dims,
                                         const fsattn_ida_params *p, const float *q, const float *k,
                                         const float *v, float *state_k, float *state_v, float *o) {
  return guarded("fsattn_ida_step", [&] { return ida_step(exec, dims, p, q, k, v, state_k, state_v, o); });
}

extern "C" fsattn_status fsattn_ida_backward(const fsattn_exec *exec, const fsattn_dims *dims,
                                             const fsattn_ida_params *p, const float *q, const float *k,
                                             const float *v, const float *state_k_in, const float *state_v_in,
                                             const float *d_o, const float *d_state_k_out,
                                             const float *d_state_v_out, float *dq, float *dk, float *dv,
                                             const fsattn_ida_grads *dp, float *d_state_k_in,
                                             float *d_state_v_in) {
  return guarded("fsattn_ida_backward", [&] {
    return ida_backward(exec, dims, p, q, k, v, state_k_in, state_v_in, d_o, d_state_k_out, d_state_v_out, dq, dk,
                        dv, dp, d_state_k_in, d_state_v_in);
  });
}

extern "C" fsattn_status fsattn_ida_forward(const fsattn_exec *exec, const fsattn_dims *dims,
                                            const fsattn_ida_params *p, const float *q, const float *k,
                                            const float *v, const float *state_k_in,
                                            const float *state_v_in, float *o, float *state_k_out,
                                            float *state_v_out) {
  return guarded("fsattn_ida_forward", [&] {
    return ida_forward(exec, dims, p, q, k, v, state_k_in, state_v_in, o, state_k_out, state_v_out);
  });
}
