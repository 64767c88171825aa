// fsattn_ida_*: validation, then the chosen IDA kernel.
#include "abi.h"
#include "calls.h"
#include "kernels.h"
#include "layout.h"
#include "status.h"
#include "tuning.h"
#include "validate.h"
#include "varlen.h"

#include <cmath>
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

fsattn_status ida_forward(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_ida_params *p, const float *q,
                          const float *k, const float *v, const float *state_k_in, const float *state_v_in, float *o,
                          float *state_k_out, float *state_v_out);

// The nine parameters, or their gradients (the same names and shapes), appended to `out` as
// a variable-length call's buffers.
template <typename Params>
void add_param_buffers(std::vector<VarlenBuffer> &out, const Params &x, const char *const (&names)[9], int64_t H,
                       int64_t Dk, int64_t Dv, int64_t M) {
  const float *ptrs[9] = {x.gk, x.bk, x.gv, x.bv, x.log_dt, x.A_re_log, x.A_im, x.B, x.C};
  const int64_t sizes[9] = {H * Dk, H * Dk, H * Dv, H * Dv, H, H * M, H * M, 2 * H * M, 2 * H * M * M};
  for (int i = 0; i < 9; ++i) out.push_back({names[i], ptrs[i], size_t(sizes[i])});
}
const char *const kParamNames[9] = {"p->gk",       "p->bk",   "p->gv", "p->bv", "p->log_dt",
                                    "p->A_re_log", "p->A_im", "p->B",  "p->C"};
const char *const kGradNames[9] = {"dp->gk",       "dp->bk",   "dp->gv", "dp->bv", "dp->log_dt",
                                   "dp->A_re_log", "dp->A_im", "dp->B",  "dp->C"};

// Each sequence of a variable-length batch as a dense call (varlen.h). If one fails, every
// output is NaN and states updated in place are restored.
fsattn_status ida_forward_varlen(const fsattn_exec *exec, const fsattn_dims *dims, const CallLayout &L,
                                 const fsattn_ida_params *p, const float *q, const float *k, const float *v,
                                 const float *state_k_in, const float *state_v_in, float *o, float *state_k_out,
                                 float *state_v_out) {
  const int64_t H = dims->heads, Dk = dims->dk, Dv = dims->dv, M = p->modes;
  const size_t nk = size_t(2 * M * Dk * H), nv = size_t(2 * M * Dv * H);
  std::vector<VarlenBuffer> buffers =
      forward_buffers(VarlenSizes(dims, L, nk, nv), q, k, v, state_k_in, state_v_in, o, state_k_out, state_v_out);
  add_param_buffers(buffers, *p, kParamNames, H, Dk, Dv, M);
  VarlenMemory mem;
  if (const fsattn_status st = varlen_memory("fsattn_ida_forward", exec, buffers, &mem); st != FSATTN_OK) return st;
  return forward_by_sequence(
      mem, dims, nk, nv, all_tokens(o, L.o, dims, Dv), state_k_in, state_v_in, state_k_out, state_v_out,
      [&](const fsattn_dims &d, const Sequence &s, const float *ski, const float *svi, float *sko, float *svo) {
        return ida_forward(exec, &d, p, tokens(q, s, L.q), tokens(k, s, L.k), tokens(v, s, L.v), ski, svi,
                           tokens(o, s, L.o), sko, svo);
      });
}

fsattn_status ida_forward(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_ida_params *p, const float *q,
                          const float *k, const float *v, const float *state_k_in, const float *state_v_in, float *o,
                          float *state_k_out, float *state_v_out) {
  Validator val("fsattn_ida_forward");
  float eps = check_ida_call(val, exec, dims, p, q, k, v);
  val.pointer("o", o);
  if (!val.ok()) return val.status();
  const CallLayout L(dims);
  check_forward_activations(val, dims, L, q, k, v, o);
  if (!val.ok()) return val.status();
  if (dims->cu_seqlens != nullptr) {
    return ida_forward_varlen(exec, dims, L, p, q, k, v, state_k_in, state_v_in, o, state_k_out, state_v_out);
  }

  fsattn_status status = FSATTN_OK;
  const Kernel *kernel = find_kernel("fsattn_ida_forward", FSATTN_OP_IDA_FORWARD, exec->device, exec->variant,
                                     call_shape(dims, p->modes), &status);
  if (kernel == nullptr) return status;
  if ((status = check_cuda_grid("fsattn_ida_forward", *kernel, dims)) != FSATTN_OK) return status;

  const int64_t B = dims->batch, T = dims->seqlen, H = dims->heads, Dk = dims->dk, Dv = dims->dv;
  const int64_t M = p->modes;
  std::vector<float> copies[2];  // initial states that overlap their final states
  KernelArgs args;
  args.batched(activation(q, L.q, Dk, H, T, B))
      .batched(activation(k, L.k, Dk, H, T, B))
      .batched(activation(v, L.v, Dv, H, T, B));
  add_ida_params(args, dims, p);
  args.batched(state_input(exec->device, state_k_in, state_k_out, {2, Dk, M, H, B}, copies[0]));
  args.batched(state_input(exec->device, state_v_in, state_v_out, {2, Dv, M, H, B}, copies[1]));
  args.scalar(&eps);
  args.output(activation(o, L.o, Dv, H, T, B));
  args.output(state_output(state_k_out, {2, Dk, M, H, B}), restore_of(copies[0]));
  args.output(state_output(state_v_out, {2, Dv, M, H, B}), restore_of(copies[1]));
  return args.run(*kernel, B, exec);
}

fsattn_status ida_backward(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_ida_params *p, const float *q,
                           const float *k, const float *v, const float *state_k_in, const float *state_v_in,
                           const float *d_o, const float *d_state_k_out, const float *d_state_v_out, float *dq,
                           float *dk, float *dv, const fsattn_ida_grads *dp, float *d_state_k_in, float *d_state_v_in);

// Each sequence as a dense call; the parameters' gradients summed over the sequences in
// order (varlen.h).
fsattn_status ida_backward_varlen(const fsattn_exec *exec, const fsattn_dims *dims, const CallLayout &L,
                                  const fsattn_ida_params *p, const float *q, const float *k, const float *v,
                                  const float *state_k_in, const float *state_v_in, const float *d_o,
                                  const float *d_state_k_out, const float *d_state_v_out, float *dq, float *dk,
                                  float *dv, const fsattn_ida_grads *dp, float *d_state_k_in, float *d_state_v_in) {
  const int64_t H = dims->heads, Dk = dims->dk, Dv = dims->dv, M = p->modes;
  const fsattn_ida_grads none = FSATTN_IDA_GRADS_INIT;
  const fsattn_ida_grads &want = dp != nullptr ? *dp : none;
  const size_t nk = size_t(2 * M * Dk * H), nv = size_t(2 * M * Dv * H);
  std::vector<VarlenBuffer> buffers =
      backward_buffers(VarlenSizes(dims, L, nk, nv), q, k, v, state_k_in, state_v_in, d_o, d_state_k_out, d_state_v_out,
                       dq, dk, dv, d_state_k_in, d_state_v_in);
  add_param_buffers(buffers, *p, kParamNames, H, Dk, Dv, M);
  add_param_buffers(buffers, want, kGradNames, H, Dk, Dv, M);
  VarlenMemory mem;
  if (const fsattn_status st = varlen_memory("fsattn_ida_backward", exec, buffers, &mem); st != FSATTN_OK) return st;
  VarlenBackward b{nk,
                   nv,
                   state_k_in,
                   state_v_in,
                   d_state_k_out,
                   d_state_v_out,
                   d_state_k_in,
                   d_state_v_in,
                   {all_tokens(dq, L.dq, dims, Dk), all_tokens(dk, L.dk, dims, Dk), all_tokens(dv, L.dv, dims, Dv)},
                   {SummedGradient(mem, want.gk, size_t(H * Dk)), SummedGradient(mem, want.bk, size_t(H * Dk)),
                    SummedGradient(mem, want.gv, size_t(H * Dv)), SummedGradient(mem, want.bv, size_t(H * Dv)),
                    SummedGradient(mem, want.log_dt, size_t(H)), SummedGradient(mem, want.A_re_log, size_t(H * M)),
                    SummedGradient(mem, want.A_im, size_t(H * M)), SummedGradient(mem, want.B, size_t(2 * H * M)),
                    SummedGradient(mem, want.C, size_t(2 * H * M * M))}};
  const std::vector<SummedGradient> &g = b.params;
  return backward_by_sequence(
      mem, "fsattn_ida_backward", dims, b,
      [&](const fsattn_dims &d, const Sequence &s, const float *ski, const float *svi, const float *dsk,
          const float *dsv, float *dski, float *dsvi) {
        const fsattn_ida_grads parts{sizeof(fsattn_ida_grads), g[0].part_data(), g[1].part_data(), g[2].part_data(),
                                     g[3].part_data(),         g[4].part_data(), g[5].part_data(), g[6].part_data(),
                                     g[7].part_data(),         g[8].part_data()};
        return ida_backward(exec, &d, p, tokens(q, s, L.q), tokens(k, s, L.k), tokens(v, s, L.v), ski, svi,
                            tokens(d_o, s, L.d_o), dsk, dsv, tokens(dq, s, L.dq), tokens(dk, s, L.dk),
                            tokens(dv, s, L.dv), &parts, dski, dsvi);
      });
}

fsattn_status ida_backward(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_ida_params *p, const float *q,
                           const float *k, const float *v, const float *state_k_in, const float *state_v_in,
                           const float *d_o, const float *d_state_k_out, const float *d_state_v_out, float *dq,
                           float *dk, float *dv, const fsattn_ida_grads *dp, float *d_state_k_in, float *d_state_v_in) {
  Validator val("fsattn_ida_backward");
  float eps = check_ida_call(val, exec, dims, p, q, k, v);
  val.pointer("d_o", d_o).pointer("dq", dq).pointer("dk", dk).pointer("dv", dv);
  if (!val.ok()) return val.status();
  const CallLayout L(dims);
  check_backward_activations(val, dims, L, q, k, v, d_o, dq, dk, dv);
  if (!val.ok()) return val.status();
  if (dims->cu_seqlens != nullptr) {
    return ida_backward_varlen(exec, dims, L, p, q, k, v, state_k_in, state_v_in, d_o, d_state_k_out, d_state_v_out, dq,
                               dk, dv, dp, d_state_k_in, d_state_v_in);
  }

  fsattn_status status = FSATTN_OK;
  const Kernel *kernel = find_kernel("fsattn_ida_backward", FSATTN_OP_IDA_BACKWARD, exec->device, exec->variant,
                                     call_shape(dims, p->modes), &status);
  if (kernel == nullptr) return status;
  if ((status = check_cuda_grid("fsattn_ida_backward", *kernel, dims)) != FSATTN_OK) return status;

  const int64_t B = dims->batch, T = dims->seqlen, H = dims->heads, Dk = dims->dk, Dv = dims->dv;
  const int64_t M = p->modes;
  // Initial states and final-state gradients that overlap the initial-state gradients written
  // over them are read from copies (and restored from them if the call fails).
  std::vector<float> state_copies[2], seed_copies[2];
  // A NULL dp, or a NULL member, skips that gradient (a sink the kernel writes one value of).
  const fsattn_ida_grads none = FSATTN_IDA_GRADS_INIT;
  const fsattn_ida_grads &g = dp != nullptr ? *dp : none;
  KernelArgs args;
  args.batched(activation(q, L.q, Dk, H, T, B))
      .batched(activation(k, L.k, Dk, H, T, B))
      .batched(activation(v, L.v, Dv, H, T, B));
  add_ida_params(args, dims, p);
  args.batched(state_input(exec->device, state_k_in, d_state_k_in, {2, Dk, M, H, B}, state_copies[0]));
  args.batched(state_input(exec->device, state_v_in, d_state_v_in, {2, Dv, M, H, B}, state_copies[1]));
  args.batched(activation(d_o, L.d_o, Dv, H, T, B));
  args.batched(state_input(exec->device, d_state_k_out, d_state_k_in, {2, Dk, M, H, B}, seed_copies[0]));
  args.batched(state_input(exec->device, d_state_v_out, d_state_v_in, {2, Dv, M, H, B}, seed_copies[1]));
  args.scalar(&eps);
  args.output(activation(dq, L.dq, Dk, H, T, B))
      .output(activation(dk, L.dk, Dk, H, T, B))
      .output(activation(dv, L.dv, Dv, H, T, B));
  args.summed(state_output(g.gk, {Dk, H})).summed(state_output(g.bk, {Dk, H}));
  args.summed(state_output(g.gv, {Dv, H})).summed(state_output(g.bv, {Dv, H}));
  args.summed(state_output(g.log_dt, {H}));
  args.summed(state_output(g.A_re_log, {M, H})).summed(state_output(g.A_im, {M, H}));
  args.summed(state_output(g.B, {2, M, H})).summed(state_output(g.C, {2, M, M, H}));
  args.output(state_output(d_state_k_in, {2, Dk, M, H, B}), restore_of(seed_copies[0], state_copies[0]));
  args.output(state_output(d_state_v_in, {2, Dv, M, H, B}), restore_of(seed_copies[1], state_copies[1]));
  return args.run(*kernel, B, exec);
}

fsattn_status ida_step(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_ida_params *p, const float *q,
                       const float *k, const float *v, float *state_k, float *state_v, float *o) {
  Validator val("fsattn_ida_step");
  float eps = check_ida_call(val, exec, dims, p, q, k, v, /*varlen_ok=*/false);
  check_one_token(val, dims);
  val.pointer("state_k", state_k).pointer("state_v", state_v).pointer("o", o);
  // The CUDA kernels load and store each (re, im) pair of a state as one 8-byte vector.
  if (val.cuda()) val.aligned("state_k", state_k, 8).aligned("state_v", state_v, 8);
  if (!val.ok()) return val.status();
  const CallLayout L(dims);
  check_forward_activations(val, dims, L, q, k, v, o);
  if (!val.ok()) return val.status();

  fsattn_status status = FSATTN_OK;
  const Kernel *kernel = find_kernel("fsattn_ida_step", FSATTN_OP_IDA_STEP, exec->device, exec->variant,
                                     call_shape(dims, p->modes), &status);
  if (kernel == nullptr) return status;
  if ((status = check_cuda_grid("fsattn_ida_step", *kernel, dims)) != FSATTN_OK) return status;

  const int64_t B = dims->batch, H = dims->heads, Dk = dims->dk, Dv = dims->dv, M = p->modes;
  // The kernel reads the old states for o, then writes the new ones in place (step.h).
  const Tensor sk(state_k, {2, Dk, M, H, B}), sv(state_v, {2, Dv, M, H, B});
  KernelArgs args;
  args.batched(activation(q, L.q, Dk, H, 1, B))
      .batched(activation(k, L.k, Dk, H, 1, B))
      .batched(activation(v, L.v, Dv, H, 1, B));
  add_ida_params(args, dims, p);
  args.batched(sk).batched(sv);
  args.scalar(&eps);
  args.output(activation(o, L.o, Dv, H, 1, B));
  args.in_place(sk).in_place(sv);
  return args.run(*kernel, B, exec);
}

}  // namespace

extern "C" fsattn_status fsattn_ida_step(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_ida_params *p,
                                         const float *q, const float *k, const float *v, float *state_k, float *state_v,
                                         float *o) {
  return guarded("fsattn_ida_step", [&] {
    CallStructs<fsattn_ida_params> s;
    const fsattn_status st = s.read("fsattn_ida_step", exec, dims, p);
    return st == FSATTN_OK ? ida_step(exec, dims, p, q, k, v, state_k, state_v, o) : st;
  });
}

extern "C" fsattn_status fsattn_ida_backward(const fsattn_exec *exec, const fsattn_dims *dims,
                                             const fsattn_ida_params *p, const float *q, const float *k, const float *v,
                                             const float *state_k_in, const float *state_v_in, const float *d_o,
                                             const float *d_state_k_out, const float *d_state_v_out, float *dq,
                                             float *dk, float *dv, const fsattn_ida_grads *dp, float *d_state_k_in,
                                             float *d_state_v_in) {
  return guarded("fsattn_ida_backward", [&] {
    CallStructs<fsattn_ida_params> s;
    if (const fsattn_status st = s.read("fsattn_ida_backward", exec, dims, p); st != FSATTN_OK) return st;
    StructReader in("fsattn_ida_backward");
    fsattn_ida_grads g;
    dp = in.read("dp", dp, &g);
    if (!in.ok()) return in.status();
    return ida_backward(exec, dims, p, q, k, v, state_k_in, state_v_in, d_o, d_state_k_out, d_state_v_out, dq, dk, dv,
                        dp, d_state_k_in, d_state_v_in);
  });
}

extern "C" fsattn_status fsattn_ida_forward(const fsattn_exec *exec, const fsattn_dims *dims,
                                            const fsattn_ida_params *p, const float *q, const float *k, const float *v,
                                            const float *state_k_in, const float *state_v_in, float *o,
                                            float *state_k_out, float *state_v_out) {
  return guarded("fsattn_ida_forward", [&] {
    CallStructs<fsattn_ida_params> s;
    if (const fsattn_status st = s.read("fsattn_ida_forward", exec, dims, p); st != FSATTN_OK) return st;
    return ida_forward(exec, dims, p, q, k, v, state_k_in, state_v_in, o, state_k_out, state_v_out);
  });
}
