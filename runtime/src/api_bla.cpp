// fsattn_bla_*: validation, then the chosen BLA kernel.
#include "abi.h"
#include "calls.h"
#include "kernels.h"
#include "layout.h"
#include "status.h"
#include "tuning.h"
#include "validate.h"
#include "varlen.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

using namespace fsattn;

namespace {

// Positions are formed in double: beyond 2^53 consecutive tokens are no longer distinct.
constexpr int64_t kMaxPosition = int64_t(1) << 53;

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// M, W and S, shared by the forward pass and the interpolation.
void check_window(Validator &val, int64_t modes, double period, int64_t slots) {
  val.range("modes", modes, 0, FSATTN_MAX_FEATURE).range("slots", slots, 1, FSATTN_MAX_FEATURE);
  val.finite("period", period);
  if (val.ok() && !(period >= FSATTN_BLA_MIN_PERIOD)) {
    val.fail(FSATTN_ERROR_INVALID_ARGUMENT,
             "period = " + number(period) + " must be at least " + number(FSATTN_BLA_MIN_PERIOD) + " tokens");
  }
}

// t mod W for an absolute position, exactly (fmod is exact, and t <= 2^53 is exact in double).
double phase_of(int64_t position, double period) { return std::fmod(double(position), period); }

// Everything the forward and the backward pass check alike: exec, dims, parameters and the
// activations.
void check_bla_call(Validator &val, const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_bla_params *p,
                    const float *q, const float *k, const float *v, bool varlen_ok = true) {
  val.exec(exec).dims(dims, varlen_ok).pointer("p", p);
  if (!val.ok()) return;
  check_window(val, p->modes, p->period, p->slots);
  val.range("p->pos0", p->pos0, 0, kMaxPosition - dims->seqlen);
  val.finite("p->scale", p->scale).pointer("p->log_gamma", p->log_gamma);
  val.pointer("q", q).pointer("k", k).pointer("v", v);
  if (!val.ok()) return;
  // On CUDA log_gamma is device memory: the kernels turn a value outside the range into NaN
  // outputs instead (bla_writes), and the host never reads it.
  for (int64_t h = 0; h < dims->heads && val.ok() && !val.cuda(); ++h) {
    const float g = p->log_gamma[h];
    if (!(std::isfinite(g) && g <= 0)) {
      val.fail(FSATTN_ERROR_INVALID_ARGUMENT, "p->log_gamma[" + std::to_string(h) + "] = " + number(g) +
                                                  " must be finite and <= 0 (a decay gamma <= 1)");
    }
  }
  const int64_t B = dims->batch, T = dims->seqlen, H = dims->heads, S = p->slots, NS = state_batch(dims);
  val.elements("q", {B, T, H, dims->dk}).elements("v", {B, T, H, dims->dv});
  val.elements("state_k", {NS, H, S, dims->dk}).elements("state_v", {NS, H, S, dims->dv});
}

// The kernel's scalar inputs, resolved on the host: phase = pos0 mod W in double, the default
// scale, the int32 sizes.
struct BlaScalars {
  double phase, period;
  int32_t modes, slots;
  float scale;
  BlaScalars(const fsattn_dims *dims, const fsattn_bla_params *p)
      : phase(phase_of(p->pos0, p->period)), period(p->period), modes(int32_t(p->modes)), slots(int32_t(p->slots)),
        scale(p->scale > 0 ? p->scale : float(1.0 / std::sqrt(double(dims->dk)))) {}
  void add_to(KernelArgs &args) const {
    args.scalar(&phase).scalar(&period).scalar(&modes).scalar(&slots).scalar(&scale);
  }
};

fsattn_status bla_forward(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_bla_params *p, const float *q,
                          const float *k, const float *v, const float *state_k_in, const float *state_v_in, float *o,
                          float *state_k_out, float *state_v_out);

// Each sequence of a variable-length batch as a dense call, with pos0 its first position
// (varlen.h). If one fails, every output is NaN and states updated in place are restored.
fsattn_status bla_forward_varlen(const fsattn_exec *exec, const fsattn_dims *dims, const CallLayout &L,
                                 const fsattn_bla_params *p, const float *q, const float *k, const float *v,
                                 const float *state_k_in, const float *state_v_in, float *o, float *state_k_out,
                                 float *state_v_out) {
  const int64_t H = dims->heads, Dk = dims->dk, Dv = dims->dv;
  const size_t nk = size_t(p->slots * Dk * H), nv = size_t(p->slots * Dv * H);
  std::vector<VarlenBuffer> buffers =
      forward_buffers(VarlenSizes(dims, L, nk, nv), q, k, v, state_k_in, state_v_in, o, state_k_out, state_v_out);
  buffers.push_back({"p->log_gamma", p->log_gamma, size_t(H)});
  VarlenMemory mem;
  if (const fsattn_status st = varlen_memory("fsattn_bla_forward", exec, buffers, &mem); st != FSATTN_OK) return st;
  return forward_by_sequence(
      mem, dims, nk, nv, all_tokens(o, L.o, dims, Dv), state_k_in, state_v_in, state_k_out, state_v_out,
      [&](const fsattn_dims &d, const Sequence &s, const float *ski, const float *svi, float *sko, float *svo) {
        return bla_forward(exec, &d, p, tokens(q, s, L.q), tokens(k, s, L.k), tokens(v, s, L.v), ski, svi,
                           tokens(o, s, L.o), sko, svo);
      });
}

fsattn_status bla_forward(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_bla_params *p, const float *q,
                          const float *k, const float *v, const float *state_k_in, const float *state_v_in, float *o,
                          float *state_k_out, float *state_v_out) {
  Validator val("fsattn_bla_forward");
  check_bla_call(val, exec, dims, p, q, k, v);
  val.pointer("o", o);
  if (!val.ok()) return val.status();
  const CallLayout L(dims);
  check_forward_activations(val, dims, L, q, k, v, o);
  if (!val.ok()) return val.status();
  if (dims->cu_seqlens != nullptr) {
    return bla_forward_varlen(exec, dims, L, p, q, k, v, state_k_in, state_v_in, o, state_k_out, state_v_out);
  }

  fsattn_status status = FSATTN_OK;
  const Kernel *kernel = find_kernel("fsattn_bla_forward", FSATTN_OP_BLA_FORWARD, exec->device, exec->variant,
                                     call_shape(dims, p->slots), &status);
  if (kernel == nullptr) return status;
  if ((status = check_cuda_grid("fsattn_bla_forward", *kernel, dims)) != FSATTN_OK) return status;

  const int64_t B = dims->batch, T = dims->seqlen, H = dims->heads, Dk = dims->dk, Dv = dims->dv;
  const int64_t S = p->slots;
  const BlaScalars scalars(dims, p);
  std::vector<float> copies[2];  // initial states that overlap their final states
  KernelArgs args;
  args.batched(activation(q, L.q, Dk, H, T, B))
      .batched(activation(k, L.k, Dk, H, T, B))
      .batched(activation(v, L.v, Dv, H, T, B));
  args.shared(Tensor(p->log_gamma, {H}));
  args.batched(state_input(exec->device, state_k_in, state_k_out, {Dk, S, H, B}, copies[0]));
  args.batched(state_input(exec->device, state_v_in, state_v_out, {Dv, S, H, B}, copies[1]));
  scalars.add_to(args);
  args.output(activation(o, L.o, Dv, H, T, B));
  args.output(state_output(state_k_out, {Dk, S, H, B}), restore_of(copies[0]));
  args.output(state_output(state_v_out, {Dv, S, H, B}), restore_of(copies[1]));
  return args.run(*kernel, B, exec);
}

fsattn_status bla_backward(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_bla_params *p, const float *q,
                           const float *k, const float *v, const float *state_k_in, const float *state_v_in,
                           const float *d_o, const float *d_state_k_out, const float *d_state_v_out, float *dq,
                           float *dk, float *dv, float *d_log_gamma, float *d_state_k_in, float *d_state_v_in);

// Each sequence as a dense call; d log γ summed over the sequences in order (varlen.h).
fsattn_status bla_backward_varlen(const fsattn_exec *exec, const fsattn_dims *dims, const CallLayout &L,
                                  const fsattn_bla_params *p, const float *q, const float *k, const float *v,
                                  const float *state_k_in, const float *state_v_in, const float *d_o,
                                  const float *d_state_k_out, const float *d_state_v_out, float *dq, float *dk,
                                  float *dv, float *d_log_gamma, float *d_state_k_in, float *d_state_v_in) {
  const int64_t H = dims->heads, Dk = dims->dk, Dv = dims->dv;
  const size_t nk = size_t(p->slots * Dk * H), nv = size_t(p->slots * Dv * H);
  std::vector<VarlenBuffer> buffers =
      backward_buffers(VarlenSizes(dims, L, nk, nv), q, k, v, state_k_in, state_v_in, d_o, d_state_k_out, d_state_v_out,
                       dq, dk, dv, d_state_k_in, d_state_v_in);
  buffers.push_back({"p->log_gamma", p->log_gamma, size_t(H)});
  buffers.push_back({"d_log_gamma", d_log_gamma, size_t(H)});
  VarlenMemory mem;
  if (const fsattn_status st = varlen_memory("fsattn_bla_backward", exec, buffers, &mem); st != FSATTN_OK) return st;
  VarlenBackward b{nk,
                   nv,
                   state_k_in,
                   state_v_in,
                   d_state_k_out,
                   d_state_v_out,
                   d_state_k_in,
                   d_state_v_in,
                   {all_tokens(dq, L.dq, dims, Dk), all_tokens(dk, L.dk, dims, Dk), all_tokens(dv, L.dv, dims, Dv)},
                   {SummedGradient(mem, d_log_gamma, size_t(H))}};
  return backward_by_sequence(mem, "fsattn_bla_backward", dims, b,
                              [&](const fsattn_dims &d, const Sequence &s, const float *ski, const float *svi,
                                  const float *dsk, const float *dsv, float *dski, float *dsvi) {
                                return bla_backward(exec, &d, p, tokens(q, s, L.q), tokens(k, s, L.k),
                                                    tokens(v, s, L.v), ski, svi, tokens(d_o, s, L.d_o), dsk, dsv,
                                                    tokens(dq, s, L.dq), tokens(dk, s, L.dk), tokens(dv, s, L.dv),
                                                    b.params[0].part_data(), dski, dsvi);
                              });
}

fsattn_status bla_backward(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_bla_params *p, const float *q,
                           const float *k, const float *v, const float *state_k_in, const float *state_v_in,
                           const float *d_o, const float *d_state_k_out, const float *d_state_v_out, float *dq,
                           float *dk, float *dv, float *d_log_gamma, float *d_state_k_in, float *d_state_v_in) {
  Validator val("fsattn_bla_backward");
  check_bla_call(val, exec, dims, p, q, k, v);
  val.pointer("d_o", d_o).pointer("dq", dq).pointer("dk", dk).pointer("dv", dv).pointer("d_log_gamma", d_log_gamma);
  if (!val.ok()) return val.status();
  const CallLayout L(dims);
  check_backward_activations(val, dims, L, q, k, v, d_o, dq, dk, dv);
  if (!val.ok()) return val.status();
  if (dims->cu_seqlens != nullptr) {
    return bla_backward_varlen(exec, dims, L, p, q, k, v, state_k_in, state_v_in, d_o, d_state_k_out, d_state_v_out, dq,
                               dk, dv, d_log_gamma, d_state_k_in, d_state_v_in);
  }

  fsattn_status status = FSATTN_OK;
  const Kernel *kernel = find_kernel("fsattn_bla_backward", FSATTN_OP_BLA_BACKWARD, exec->device, exec->variant,
                                     call_shape(dims, p->slots), &status);
  if (kernel == nullptr) return status;
  if ((status = check_cuda_grid("fsattn_bla_backward", *kernel, dims)) != FSATTN_OK) return status;

  const int64_t B = dims->batch, T = dims->seqlen, H = dims->heads, Dk = dims->dk, Dv = dims->dv;
  const int64_t S = p->slots;
  const BlaScalars scalars(dims, p);
  // Initial states and final-state gradients that overlap the initial-state gradients written
  // over them are read from copies (and restored from them if the call fails).
  std::vector<float> state_copies[2], seed_copies[2];
  KernelArgs args;
  args.batched(activation(q, L.q, Dk, H, T, B))
      .batched(activation(k, L.k, Dk, H, T, B))
      .batched(activation(v, L.v, Dv, H, T, B));
  args.shared(Tensor(p->log_gamma, {H}));
  args.batched(state_input(exec->device, state_k_in, d_state_k_in, {Dk, S, H, B}, state_copies[0]));
  args.batched(state_input(exec->device, state_v_in, d_state_v_in, {Dv, S, H, B}, state_copies[1]));
  args.batched(activation(d_o, L.d_o, Dv, H, T, B));
  args.batched(state_input(exec->device, d_state_k_out, d_state_k_in, {Dk, S, H, B}, seed_copies[0]));
  args.batched(state_input(exec->device, d_state_v_out, d_state_v_in, {Dv, S, H, B}, seed_copies[1]));
  scalars.add_to(args);
  args.output(activation(dq, L.dq, Dk, H, T, B))
      .output(activation(dk, L.dk, Dk, H, T, B))
      .output(activation(dv, L.dv, Dv, H, T, B));
  args.summed(Tensor(d_log_gamma, {H}));
  args.output(state_output(d_state_k_in, {Dk, S, H, B}), restore_of(seed_copies[0], state_copies[0]));
  args.output(state_output(d_state_v_in, {Dv, S, H, B}), restore_of(seed_copies[1], state_copies[1]));
  return args.run(*kernel, B, exec);
}

fsattn_status bla_step(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_bla_params *p, const float *q,
                       const float *k, const float *v, float *state_k, float *state_v, float *o) {
  Validator val("fsattn_bla_step");
  check_bla_call(val, exec, dims, p, q, k, v, /*varlen_ok=*/false);
  check_one_token(val, dims);
  val.pointer("state_k", state_k).pointer("state_v", state_v).pointer("o", o);
  if (!val.ok()) return val.status();
  const CallLayout L(dims);
  check_forward_activations(val, dims, L, q, k, v, o);
  if (!val.ok()) return val.status();

  fsattn_status status = FSATTN_OK;
  const Kernel *kernel = find_kernel("fsattn_bla_step", FSATTN_OP_BLA_STEP, exec->device, exec->variant,
                                     call_shape(dims, p->slots), &status);
  if (kernel == nullptr) return status;
  if ((status = check_cuda_grid("fsattn_bla_step", *kernel, dims)) != FSATTN_OK) return status;

  const int64_t B = dims->batch, H = dims->heads, Dk = dims->dk, Dv = dims->dv, S = p->slots;
  const BlaScalars scalars(dims, p);
  // The kernel reads the old states for o, then writes the new ones in place (step.h).
  const Tensor sk(state_k, {Dk, S, H, B}), sv(state_v, {Dv, S, H, B});
  KernelArgs args;
  args.batched(activation(q, L.q, Dk, H, 1, B))
      .batched(activation(k, L.k, Dk, H, 1, B))
      .batched(activation(v, L.v, Dv, H, 1, B));
  args.shared(Tensor(p->log_gamma, {H}));
  args.batched(sk).batched(sv);
  scalars.add_to(args);
  args.output(activation(o, L.o, Dv, H, 1, B));
  args.in_place(sk).in_place(sv);
  return args.run(*kernel, B, exec);
}

fsattn_status bla_interpolate(const fsattn_exec *exec, int64_t batch, int64_t heads, int64_t dim, int64_t modes,
                              double period, int64_t slots, int64_t position, const double *lags, int64_t num_lags,
                              const float *state, float *out) {
  Validator val("fsattn_bla_interpolate");
  val.exec(exec);
  if (val.cuda())
    val.fail(FSATTN_ERROR_UNSUPPORTED, "there is no CUDA kernel for the interpolation (exec->device = CUDA)");
  val.range("batch", batch, 1, INT32_MAX).range("heads", heads, 1, FSATTN_MAX_HEADS);
  val.range("dim", dim, 1, FSATTN_MAX_FEATURE);
  check_window(val, modes, period, slots);
  val.range("position", position, 0, kMaxPosition).range("num_lags", num_lags, 1, INT32_MAX);
  val.pointer("lags", lags).pointer("state", state).pointer("out", out);
  for (int64_t n = 0; n < num_lags && val.ok(); ++n) {
    if (!(std::abs(lags[n]) <= double(kMaxPosition))) {
      val.fail(FSATTN_ERROR_INVALID_ARGUMENT,
               "lags[" + std::to_string(n) + "] = " + number(lags[n]) + " is not a finite lag within 2^53");
    }
  }
  val.elements("state", {batch, heads, slots, dim}).elements("out", {batch, heads, num_lags, dim});
  if (!val.ok()) return val.status();

  fsattn_status status = FSATTN_OK;
  const Kernel *kernel = find_kernel("fsattn_bla_interpolate", FSATTN_OP_BLA_INTERPOLATE, exec->device, exec->variant,
                                     CallShape{batch, num_lags, heads, dim, dim, slots}, &status);
  if (kernel == nullptr) return status;

  double phase = phase_of(position, period);
  int32_t m = int32_t(modes);
  KernelArgs args;
  args.batched(Tensor(state, {dim, slots, heads, batch}));
  args.shared(Tensor::float64(lags, {num_lags}));
  args.scalar(&phase).scalar(&period).scalar(&m);
  args.output(Tensor(out, {dim, num_lags, heads, batch}));
  return args.run(*kernel, batch, exec);
}

}  // namespace

extern "C" fsattn_status fsattn_bla_forward(const fsattn_exec *exec, const fsattn_dims *dims,
                                            const fsattn_bla_params *p, const float *q, const float *k, const float *v,
                                            const float *state_k_in, const float *state_v_in, float *o,
                                            float *state_k_out, float *state_v_out) {
  return guarded("fsattn_bla_forward", [&] {
    CallStructs<fsattn_bla_params> s;
    if (const fsattn_status st = s.read("fsattn_bla_forward", exec, dims, p); st != FSATTN_OK) return st;
    return bla_forward(exec, dims, p, q, k, v, state_k_in, state_v_in, o, state_k_out, state_v_out);
  });
}

extern "C" fsattn_status fsattn_bla_backward(const fsattn_exec *exec, const fsattn_dims *dims,
                                             const fsattn_bla_params *p, const float *q, const float *k, const float *v,
                                             const float *state_k_in, const float *state_v_in, const float *d_o,
                                             const float *d_state_k_out, const float *d_state_v_out, float *dq,
                                             float *dk, float *dv, float *d_log_gamma, float *d_state_k_in,
                                             float *d_state_v_in) {
  return guarded("fsattn_bla_backward", [&] {
    CallStructs<fsattn_bla_params> s;
    if (const fsattn_status st = s.read("fsattn_bla_backward", exec, dims, p); st != FSATTN_OK) return st;
    return bla_backward(exec, dims, p, q, k, v, state_k_in, state_v_in, d_o, d_state_k_out, d_state_v_out, dq, dk, dv,
                        d_log_gamma, d_state_k_in, d_state_v_in);
  });
}

extern "C" fsattn_status fsattn_bla_step(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_bla_params *p,
                                         const float *q, const float *k, const float *v, float *state_k, float *state_v,
                                         float *o) {
  return guarded("fsattn_bla_step", [&] {
    CallStructs<fsattn_bla_params> s;
    const fsattn_status st = s.read("fsattn_bla_step", exec, dims, p);
    return st == FSATTN_OK ? bla_step(exec, dims, p, q, k, v, state_k, state_v, o) : st;
  });
}

extern "C" fsattn_status fsattn_bla_interpolate(const fsattn_exec *exec, int64_t batch, int64_t heads, int64_t dim,
                                                int64_t modes, double period, int64_t slots, int64_t position,
                                                const double *lags, int64_t num_lags, const float *state, float *out) {
  return guarded("fsattn_bla_interpolate", [&] {
    StructReader in("fsattn_bla_interpolate");
    fsattn_exec e;
    exec = in.read("exec", exec, &e);
    if (!in.ok()) return in.status();
    return bla_interpolate(exec, batch, heads, dim, modes, period, slots, position, lags, num_lags, state, out);
  });
}
