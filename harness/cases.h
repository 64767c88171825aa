// Shared test helpers: random inputs (rounded to float32 for the kernels, widened for the
// float64 reference), the error measure of docs/spec.md §4, and IDA test cases.
#pragma once

#include "fsattn/fsattn.h"
#include "reference/bla_reference.h"
#include "reference/ida_reference.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace fsattn::test {

// A float32 tensor and the same values widened to double.
struct Tensor32 {
  std::vector<float> f;
  std::vector<double> d;
  void set(std::vector<float> values) {
    f = std::move(values);
    d.assign(f.begin(), f.end());
  }
  const float *ptr() const { return f.empty() ? nullptr : f.data(); }
};

inline Tensor32 random_tensor(std::mt19937_64 &rng, size_t n, double lo = -1, double hi = 1) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<float> v(n);
  for (float &e : v) e = float(u(rng));
  Tensor32 t;
  t.set(std::move(v));
  return t;
}

// ||a - b||_F / ||b||_F (b is the reference).
inline double rel_error(const std::vector<float> &a, const std::vector<double> &b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1.0));
}
inline double rel_error(const std::vector<float> &a, const std::vector<float> &b) {
  return rel_error(a, std::vector<double>(b.begin(), b.end()));
}

struct IdaCase {
  ref::IdaShape s;
  Tensor32 q, k, v, gk, bk, gv, bv, log_dt, A_re_log, A_im, B, C;
  Tensor32 state_k, state_v;  // empty: zero initial state
  float eps = 1e-6f;

  fsattn_dims dims() const { return {sizeof(fsattn_dims), s.B, s.T, s.H, s.Dk, s.Dv, nullptr, 0}; }
  fsattn_ida_params params() const {
    return {sizeof(fsattn_ida_params),
            s.M,
            eps,
            gk.ptr(),
            bk.ptr(),
            gv.ptr(),
            bv.ptr(),
            log_dt.ptr(),
            A_re_log.ptr(),
            A_im.ptr(),
            B.ptr(),
            C.ptr()};
  }
  ref::IdaParams ref_params() const {
    return {gk.d, bk.d, gv.d, bv.d, log_dt.d, A_re_log.d, A_im.d, B.d, C.d, double(eps)};
  }
};

// S4D-Inv modes (docs/spec.md §1) with the other parameters perturbed so every one matters.
inline IdaCase make_ida_case(ref::IdaShape s, uint64_t seed, bool with_state) {
  std::mt19937_64 rng(seed);
  IdaCase c;
  c.s = s;
  const size_t act_k = s.B * s.T * s.H * s.Dk, act_v = s.B * s.T * s.H * s.Dv;
  c.q = random_tensor(rng, act_k, -2, 2);
  c.k = random_tensor(rng, act_k, -2, 2);
  c.v = random_tensor(rng, act_v, -2, 2);
  c.gk = random_tensor(rng, s.H * s.Dk, 0.5, 1.5);
  c.bk = random_tensor(rng, s.H * s.Dk, -0.5, 0.5);
  c.gv = random_tensor(rng, s.H * s.Dv, 0.5, 1.5);
  c.bv = random_tensor(rng, s.H * s.Dv, -0.5, 0.5);
  c.log_dt = random_tensor(rng, s.H, std::log(1e-3), std::log(1e-1));
  std::vector<float> are(s.H * s.M), aim(s.H * s.M);
  std::uniform_real_distribution<double> jitter(-0.3, 0.3);
  for (int64_t h = 0; h < s.H; ++h)
    for (int64_t n = 0; n < s.M; ++n) {
      are[h * s.M + n] = float(std::log(0.5) + jitter(rng));
      aim[h * s.M + n] = float(double(s.M) / M_PI * (double(s.M) / (2 * n + 1) - 1));
    }
  c.A_re_log.set(are);
  c.A_im.set(aim);
  c.B = random_tensor(rng, s.H * s.M * 2, 0.5, 1.5);
  std::normal_distribution<double> normal(0.0, std::sqrt(1.0 / (2.0 * s.M)));  // complex var 1/M
  std::vector<float> C(s.H * s.M * s.M * 2);
  for (float &e : C) e = float(normal(rng));
  c.C.set(C);
  if (with_state) {
    c.state_k = random_tensor(rng, s.B * s.H * s.M * s.Dk * 2);
    c.state_v = random_tensor(rng, s.B * s.H * s.M * s.Dv * 2);
  }
  return c;
}

// A forward call's status and outputs (NaN where the kernel wrote nothing).
struct ForwardResult {
  fsattn_status status;
  std::vector<float> o, state_k, state_v;
};
using IdaResult = ForwardResult;
using BlaResult = ForwardResult;

// Calls forward(exec, dims, params, q, k, v, state_k_in, state_v_in, o, state_k_out,
// state_v_out) on case c, with outputs of `o_size` and `state_k_size`/`state_v_size` values.
template <typename Case, typename Params, typename Forward>
ForwardResult run_forward(const Case &c, const Params &params, Forward forward, const char *variant, size_t o_size,
                          size_t state_k_size, size_t state_v_size) {
  ForwardResult r;
  r.o.assign(o_size, NAN);
  r.state_k.assign(state_k_size, NAN);
  r.state_v.assign(state_v_size, NAN);
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, variant};
  fsattn_dims dims = c.dims();
  r.status = forward(&exec, &dims, &params, c.q.ptr(), c.k.ptr(), c.v.ptr(), c.state_k.ptr(), c.state_v.ptr(),
                     r.o.data(), r.state_k.data(), r.state_v.data());
  return r;
}

inline IdaResult run_ida_forward(const IdaCase &c, const char *variant = nullptr) {
  const auto &s = c.s;
  return run_forward(c, c.params(), fsattn_ida_forward, variant, s.B * s.T * s.H * s.Dv, s.B * s.H * s.M * s.Dk * 2,
                     s.B * s.H * s.M * s.Dv * 2);
}

inline ref::IdaOutputs reference_ida_forward(const IdaCase &c) {
  return ref::ida_forward(c.s, c.ref_params(), c.q.d, c.k.d, c.v.d, c.state_k.d, c.state_v.d);
}

// The upstream gradients of an IDA backward call: d_o, and the final states' (empty: NULL).
struct IdaUpstream {
  Tensor32 d_o, d_state_k, d_state_v;
};
inline IdaUpstream make_ida_upstream(const IdaCase &c, uint64_t seed, bool with_state_grads) {
  std::mt19937_64 rng(seed);
  const auto &s = c.s;
  IdaUpstream u;
  u.d_o = random_tensor(rng, s.B * s.T * s.H * s.Dv);
  if (with_state_grads) {
    u.d_state_k = random_tensor(rng, s.B * s.H * s.M * s.Dk * 2);
    u.d_state_v = random_tensor(rng, s.B * s.H * s.M * s.Dv * 2);
  }
  return u;
}

// An IDA backward call's status and gradients (NaN where the kernel wrote nothing).
struct IdaGradResult {
  fsattn_status status;
  std::vector<float> q, k, v, gk, bk, gv, bv, log_dt, A_re_log, A_im, B, C, state_k, state_v;
  fsattn_ida_grads params() {
    return {sizeof(fsattn_ida_grads), gk.data(),   bk.data(), gv.data(), bv.data(), log_dt.data(),
            A_re_log.data(),          A_im.data(), B.data(),  C.data()};
  }
};

inline IdaGradResult run_ida_backward(const IdaCase &c, const IdaUpstream &u, const char *variant = nullptr) {
  const auto &s = c.s;
  IdaGradResult r;
  for (auto [x, n] : {std::pair(&r.q, s.Dk), std::pair(&r.k, s.Dk), std::pair(&r.v, s.Dv)}) {
    x->assign(s.B * s.T * s.H * n, NAN);
  }
  r.gk.assign(s.H * s.Dk, NAN);
  r.bk.assign(s.H * s.Dk, NAN);
  r.gv.assign(s.H * s.Dv, NAN);
  r.bv.assign(s.H * s.Dv, NAN);
  r.log_dt.assign(s.H, NAN);
  r.A_re_log.assign(s.H * s.M, NAN);
  r.A_im.assign(s.H * s.M, NAN);
  r.B.assign(s.H * s.M * 2, NAN);
  r.C.assign(s.H * s.M * s.M * 2, NAN);
  r.state_k.assign(s.B * s.H * s.M * s.Dk * 2, NAN);
  r.state_v.assign(s.B * s.H * s.M * s.Dv * 2, NAN);
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, variant};
  fsattn_dims dims = c.dims();
  fsattn_ida_params p = c.params();
  fsattn_ida_grads dp = r.params();
  r.status = fsattn_ida_backward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), c.state_k.ptr(), c.state_v.ptr(),
                                 u.d_o.ptr(), u.d_state_k.ptr(), u.d_state_v.ptr(), r.q.data(), r.k.data(), r.v.data(),
                                 &dp, r.state_k.data(), r.state_v.data());
  return r;
}

inline ref::IdaGrads reference_ida_backward(const IdaCase &c, const IdaUpstream &u) {
  return ref::ida_backward(c.s, c.ref_params(), c.q.d, c.k.d, c.v.d, c.state_k.d, c.state_v.d, u.d_o.d, u.d_state_k.d,
                           u.d_state_v.d);
}

// Tokens [t0, t1) of a [B,T,H,D] tensor.
inline Tensor32 slice_tokens(const Tensor32 &x, int64_t B, int64_t T, int64_t H, int64_t D, int64_t t0, int64_t t1) {
  std::vector<float> y;
  for (int64_t b = 0; b < B; ++b)
    y.insert(y.end(), x.f.begin() + (b * T + t0) * H * D, x.f.begin() + (b * T + t1) * H * D);
  Tensor32 t;
  t.set(std::move(y));
  return t;
}

// Pieces [B,T1,H,D] and [B,T2,H,D] joined along T.
inline std::vector<float> join_tokens(const std::vector<float> &a, const std::vector<float> &b, int64_t B) {
  std::vector<float> y;
  const size_t na = a.size() / B, nb = b.size() / B;
  for (int64_t i = 0; i < B; ++i) {
    y.insert(y.end(), a.begin() + i * na, a.begin() + (i + 1) * na);
    y.insert(y.end(), b.begin() + i * nb, b.begin() + (i + 1) * nb);
  }
  return y;
}

struct BlaCase {
  ref::BlaShape s;
  int64_t pos0 = 0;
  float scale = 0;  // the API's: <= 0 means Dk^-1/2
  Tensor32 q, k, v, log_gamma;
  Tensor32 state_k, state_v;  // empty: zero initial state

  fsattn_dims dims() const { return {sizeof(fsattn_dims), s.B, s.T, s.H, s.Dk, s.Dv, nullptr, 0}; }
  fsattn_bla_params params() const { return {sizeof(fsattn_bla_params), s.M, s.W, s.S, scale, pos0, log_gamma.ptr()}; }
  ref::BlaParams ref_params() const {
    return {log_gamma.d, scale > 0 ? double(scale) : 1 / std::sqrt(double(s.Dk)), pos0};
  }
  // Tokens [t0, t1) of this case, starting from the given states, pos0 advanced.
  BlaCase tokens(int64_t t0, int64_t t1) const {
    BlaCase c = *this;
    c.s.T = t1 - t0;
    c.pos0 = pos0 + t0;
    c.q = slice_tokens(q, s.B, s.T, s.H, s.Dk, t0, t1);
    c.k = slice_tokens(k, s.B, s.T, s.H, s.Dk, t0, t1);
    c.v = slice_tokens(v, s.B, s.T, s.H, s.Dv, t0, t1);
    return c;
  }
};

// Random activations in [-2, 2] and per-head γ in [gamma_lo, 1].
inline BlaCase make_bla_case(ref::BlaShape s, int64_t pos0, uint64_t seed, double gamma_lo, bool with_state) {
  std::mt19937_64 rng(seed);
  BlaCase c;
  c.s = s;
  c.pos0 = pos0;
  c.q = random_tensor(rng, s.B * s.T * s.H * s.Dk, -2, 2);
  c.k = random_tensor(rng, s.B * s.T * s.H * s.Dk, -2, 2);
  c.v = random_tensor(rng, s.B * s.T * s.H * s.Dv, -2, 2);
  c.log_gamma = random_tensor(rng, s.H, std::log(gamma_lo), 0);
  if (with_state) {
    c.state_k = random_tensor(rng, s.B * s.H * s.S * s.Dk);
    c.state_v = random_tensor(rng, s.B * s.H * s.S * s.Dv);
  }
  return c;
}

inline BlaResult run_bla_forward(const BlaCase &c, const char *variant = nullptr) {
  const auto &s = c.s;
  return run_forward(c, c.params(), fsattn_bla_forward, variant, s.B * s.T * s.H * s.Dv, s.B * s.H * s.S * s.Dk,
                     s.B * s.H * s.S * s.Dv);
}

inline ref::BlaOutputs reference_bla_forward(const BlaCase &c) {
  return ref::bla_forward(c.s, c.ref_params(), c.q.d, c.k.d, c.v.d, c.state_k.d, c.state_v.d);
}

// The upstream gradients of a backward call: d_o, and the final states' (empty: NULL).
struct BlaUpstream {
  Tensor32 d_o, d_state_k, d_state_v;
};
inline BlaUpstream make_bla_upstream(const BlaCase &c, uint64_t seed, bool with_state_grads) {
  std::mt19937_64 rng(seed);
  const auto &s = c.s;
  BlaUpstream u;
  u.d_o = random_tensor(rng, s.B * s.T * s.H * s.Dv);
  if (with_state_grads) {
    u.d_state_k = random_tensor(rng, s.B * s.H * s.S * s.Dk);
    u.d_state_v = random_tensor(rng, s.B * s.H * s.S * s.Dv);
  }
  return u;
}

// A backward call's status and gradients (NaN where the kernel wrote nothing).
struct BlaGradResult {
  fsattn_status status;
  std::vector<float> q, k, v, log_gamma, state_k, state_v;
};

inline BlaGradResult run_bla_backward(const BlaCase &c, const BlaUpstream &u, const char *variant = nullptr) {
  const auto &s = c.s;
  BlaGradResult r;
  r.q.assign(s.B * s.T * s.H * s.Dk, NAN);
  r.k.assign(s.B * s.T * s.H * s.Dk, NAN);
  r.v.assign(s.B * s.T * s.H * s.Dv, NAN);
  r.log_gamma.assign(s.H, NAN);
  r.state_k.assign(s.B * s.H * s.S * s.Dk, NAN);
  r.state_v.assign(s.B * s.H * s.S * s.Dv, NAN);
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, variant};
  fsattn_dims dims = c.dims();
  fsattn_bla_params p = c.params();
  r.status = fsattn_bla_backward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), c.state_k.ptr(), c.state_v.ptr(),
                                 u.d_o.ptr(), u.d_state_k.ptr(), u.d_state_v.ptr(), r.q.data(), r.k.data(), r.v.data(),
                                 r.log_gamma.data(), r.state_k.data(), r.state_v.data());
  return r;
}

inline ref::BlaGrads reference_bla_backward(const BlaCase &c, const BlaUpstream &u) {
  return ref::bla_backward(c.s, c.ref_params(), c.q.d, c.k.d, c.v.d, c.state_k.d, c.state_v.d, u.d_o.d, u.d_state_k.d,
                           u.d_state_v.d);
}

// A case's parameters in an arena's memory: up(x) copies each tensor there (the CUDA
// harness's DeviceArena, the tests' HostArena).
template <typename Arena>
fsattn_ida_params params_in(Arena &a, const IdaCase &c) {
  return {sizeof(fsattn_ida_params),
          c.s.M,
          c.eps,
          a.up(c.gk),
          a.up(c.bk),
          a.up(c.gv),
          a.up(c.bv),
          a.up(c.log_dt),
          a.up(c.A_re_log),
          a.up(c.A_im),
          a.up(c.B),
          a.up(c.C)};
}
template <typename Arena>
fsattn_bla_params params_in(Arena &a, const BlaCase &c) {
  fsattn_bla_params p = c.params();
  p.log_gamma = a.up(c.log_gamma);
  return p;
}

// Autoscheduled variants are benchmark baselines: they assume shapes near the estimates they
// were tuned for (sizes that are multiples of the vector width) and may refuse others.
inline bool is_baseline(const std::string &variant) {
  for (const char *autoscheduler : {"adams2019", "mullapudi2016", "li2018", "anderson2021"}) {
    if (variant.find(autoscheduler) != std::string::npos) return true;
  }
  return false;
}

enum class Schedules { kAll, kHand, kBaselines };

// The compiled variants of an op on a device, in the kernel table's order.
inline std::vector<std::string> variants(fsattn_op op, fsattn_device device, Schedules which = Schedules::kAll) {
  std::vector<std::string> v;
  for (int i = 0; i < fsattn_variant_count(op, device); ++i) {
    std::string name = fsattn_variant_name(op, device, i);
    if (which == Schedules::kAll || (which == Schedules::kBaselines) == is_baseline(name)) v.push_back(name);
  }
  return v;
}
inline std::vector<std::string> cpu_variants(fsattn_op op, Schedules which = Schedules::kAll) {
  return variants(op, FSATTN_DEVICE_CPU, which);
}

// Whether this build has autoscheduled baselines for a device: only -DFSATTN_BASELINES=ON
// builds them, and their tests skip with kNoBaselines without them.
inline bool has_baselines(fsattn_device device) {
  for (fsattn_op op : {FSATTN_OP_IDA_FORWARD, FSATTN_OP_IDA_BACKWARD, FSATTN_OP_BLA_FORWARD, FSATTN_OP_BLA_BACKWARD}) {
    if (!variants(op, device, Schedules::kBaselines).empty()) return true;
  }
  return false;
}
constexpr char kNoBaselines[] = "this build has no autoscheduled baselines (-DFSATTN_BASELINES=ON builds them)";

}  // namespace fsattn::test
