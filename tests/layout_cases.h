// Activations laid out with strides (dims->layout): q and k as slices of one fused buffer,
// head-major tensors with padding between heads, and gradients written into one fused buffer.
// Each check runs a call with such layouts and expects, bitwise, the outputs of the same call
// on dense tensors, with every element between the strided ones left as it was. The memory
// comes from an Arena: HostArena here, DeviceArena (device.h) on the GPU.
#pragma once

#include "cases.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

namespace fsattn::test {

constexpr float kGap = 12345.0f;  // what lies between strided elements

// Host memory with DeviceArena's interface.
class HostArena {
 public:
  float *up(const Tensor32 &x) { return up(x.f); }
  float *up(const std::vector<float> &x) {
    all_.push_back(std::make_unique<std::vector<float>>(x));
    return all_.back()->empty() ? nullptr : all_.back()->data();
  }
  float *out(size_t n) { return up(std::vector<float>(n, NAN)); }
  std::vector<float> down(const float *p) const {
    for (const auto &v : all_) {
      if (!v->empty() && v->data() == p) return *v;
    }
    ADD_FAILURE() << "not a tensor of this arena";
    return {};
  }

 private:
  std::vector<std::unique_ptr<std::vector<float>>> all_;
};

// Where an activation [B, T, H, D] lies in its buffer.
struct Placement {
  int64_t offset;
  fsattn_strides s;
  int64_t B, T, H, D;
  int64_t index(int64_t b, int64_t t, int64_t h, int64_t d) const {
    return offset + b * s.batch + t * s.token + h * s.head + d;
  }
  int64_t end() const { return index(B - 1, T - 1, H - 1, D); }
};

// The i-th of n activations of one fused buffer [B, T, n, H, D].
inline Placement fused(int64_t i, int64_t n, int64_t B, int64_t T, int64_t H, int64_t D) {
  return {i * H * D, {T * n * H * D, n * H * D, D}, B, T, H, D};
}
// A head-major buffer [B, H, T, D] with `pad` unused elements after each head's tokens.
inline Placement head_major(int64_t B, int64_t T, int64_t H, int64_t D, int64_t pad) {
  return {0, {H * (T * D + pad), D, T * D + pad}, B, T, H, D};
}

// A buffer of gaps holding the dense tensors `xs` at their placements.
inline std::vector<float> scatter(std::initializer_list<std::pair<Placement, const std::vector<float> *>> xs) {
  int64_t size = 0;
  for (const auto &[p, x] : xs) size = std::max(size, p.end());
  std::vector<float> buf(size_t(size), kGap);
  for (const auto &[p, x] : xs) {
    if (x == nullptr) continue;
    size_t i = 0;
    for (int64_t b = 0; b < p.B; ++b)
      for (int64_t t = 0; t < p.T; ++t)
        for (int64_t h = 0; h < p.H; ++h)
          for (int64_t d = 0; d < p.D; ++d) buf[size_t(p.index(b, t, h, d))] = (*x)[i++];
  }
  return buf;
}

inline std::vector<float> gather(const std::vector<float> &buf, const Placement &p) {
  std::vector<float> x;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t t = 0; t < p.T; ++t)
      for (int64_t h = 0; h < p.H; ++h)
        for (int64_t d = 0; d < p.D; ++d) x.push_back(buf[size_t(p.index(b, t, h, d))]);
  return x;
}

// How many elements of buf outside the placements no longer hold the gap value.
inline size_t gaps_written(const std::vector<float> &buf, std::initializer_list<Placement> ps) {
  std::vector<bool> used(buf.size(), false);
  for (const Placement &p : ps)
    for (int64_t b = 0; b < p.B; ++b)
      for (int64_t t = 0; t < p.T; ++t)
        for (int64_t h = 0; h < p.H; ++h)
          for (int64_t d = 0; d < p.D; ++d) used[size_t(p.index(b, t, h, d))] = true;
  size_t n = 0;
  for (size_t i = 0; i < buf.size(); ++i) n += !used[i] && buf[i] != kGap;
  return n;
}

// Bitwise equality (NaN equal to NaN), with the first difference in the message.
inline ::testing::AssertionResult same_bits(const std::vector<float> &a, const std::vector<float> &b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "sizes " << a.size() << " and " << b.size();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure() << "element " << i << ": " << a[i] << " vs " << b[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// The layouts a forward pass (or a step, T = 1) is checked with: q and k fused, v and o
// head-major with padding.
struct ForwardLayout {
  Placement q, k, v, o;
  ForwardLayout(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv)
      : q(fused(0, 2, B, T, H, Dk)), k(fused(1, 2, B, T, H, Dk)), v(head_major(B, T, H, Dv, 3)),
        o(head_major(B, T, H, Dv, 5)) {}
  fsattn_layout layout() const {
    fsattn_layout l = FSATTN_LAYOUT_INIT;
    l.q = q.s, l.k = k.s, l.v = v.s, l.o = o.s;
    return l;
  }
};

// The backward pass's: q, k and v as the forward's, d_o head-major, dq and dk fused into one
// buffer, dv head-major.
struct BackwardLayout : ForwardLayout {
  Placement d_o, dq, dk, dv;
  BackwardLayout(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv)
      : ForwardLayout(B, T, H, Dk, Dv), d_o(head_major(B, T, H, Dv, 1)), dq(fused(0, 2, B, T, H, Dk)),
        dk(fused(1, 2, B, T, H, Dk)), dv(head_major(B, T, H, Dv, 2)) {}
  fsattn_layout layout() const {
    fsattn_layout l = ForwardLayout::layout();
    l.d_o = d_o.s, l.dq = dq.s, l.dk = dk.s, l.dv = dv.s;
    return l;
  }
};

// The strided inputs of a forward pass, in the arena: q and k in one buffer, v in another,
// and o's buffer of gaps.
template <typename Arena>
struct StridedForward {
  float *qk, *v, *o;
  StridedForward(Arena &a, const ForwardLayout &l, const Tensor32 &q, const Tensor32 &k, const Tensor32 &v_) {
    qk = a.up(scatter({{l.q, &q.f}, {l.k, &k.f}}));
    v = a.up(scatter({{l.v, &v_.f}}));
    o = a.up(scatter({{l.o, nullptr}}));
  }
  // o as a dense tensor, after checking that nothing between its elements was written.
  std::vector<float> dense_o(Arena &a, const ForwardLayout &l) const {
    const std::vector<float> buf = a.down(o);
    EXPECT_EQ(gaps_written(buf, {l.o}), 0u) << "o's gaps were written";
    return gather(buf, l.o);
  }
};

// The same for a backward pass: d_o's buffer, and dq and dk's buffer and dv's of gaps.
template <typename Arena>
struct StridedBackward : StridedForward<Arena> {
  float *d_o, *dqk, *dv;
  StridedBackward(Arena &a, const BackwardLayout &l, const Tensor32 &q, const Tensor32 &k, const Tensor32 &v,
                  const Tensor32 &d_o_)
      : StridedForward<Arena>(a, l, q, k, v) {
    d_o = a.up(scatter({{l.d_o, &d_o_.f}}));
    dqk = a.up(scatter({{l.dq, nullptr}, {l.dk, nullptr}}));
    dv = a.up(scatter({{l.dv, nullptr}}));
  }
  // dq, dk and dv as dense tensors, their gaps checked.
  std::vector<std::vector<float>> dense_grads(Arena &a, const BackwardLayout &l) const {
    const std::vector<float> qk = a.down(dqk), v = a.down(dv);
    EXPECT_EQ(gaps_written(qk, {l.dq, l.dk}), 0u) << "dq and dk's gaps were written";
    EXPECT_EQ(gaps_written(v, {l.dv}), 0u) << "dv's gaps were written";
    return {gather(qk, l.dq), gather(qk, l.dk), gather(v, l.dv)};
  }
};

// `forward` over a variable-length batch: the call's dims with these cu_seqlens.
template <typename Forward>
auto varlen(Forward forward, const std::vector<int64_t> &cu) {
  return [forward, &cu](const fsattn_exec *e, const fsattn_dims *d, const auto *p, const float *q, const float *k,
                        const float *v, const float *ski, const float *svi, float *o, float *sko, float *svo) {
    fsattn_dims dv = *d;
    dv.cu_seqlens = cu.data(), dv.num_seqs = int64_t(cu.size()) - 1;
    return forward(e, &dv, p, q, k, v, ski, svi, o, sko, svo);
  };
}

// A forward pass with strided activations against the same call on dense ones: o, and the
// final states. `forward` is fsattn_ida_forward or fsattn_bla_forward; nk, nv the state sizes.
template <typename Arena, typename Case, typename Forward>
void check_forward_layout(Arena &a, fsattn_exec exec, const Case &c, Forward forward, size_t nk, size_t nv) {
  const auto &s = c.s;
  const auto p = params_in(a, c);
  const float *ski = a.up(c.state_k), *svi = a.up(c.state_v);
  fsattn_dims dims = c.dims();
  float *o = a.out(size_t(s.B * s.T * s.H * s.Dv)), *sko = a.out(nk), *svo = a.out(nv);
  ASSERT_EQ(forward(&exec, &dims, &p, a.up(c.q), a.up(c.k), a.up(c.v), ski, svi, o, sko, svo), FSATTN_OK)
      << fsattn_last_error();

  const ForwardLayout l(s.B, s.T, s.H, s.Dk, s.Dv);
  const fsattn_layout layout = l.layout();
  dims.layout = &layout;
  const StridedForward<Arena> x(a, l, c.q, c.k, c.v);
  float *sko2 = a.out(nk), *svo2 = a.out(nv);
  ASSERT_EQ(forward(&exec, &dims, &p, x.qk + l.q.offset, x.qk + l.k.offset, x.v, ski, svi, x.o, sko2, svo2), FSATTN_OK)
      << fsattn_last_error();
  EXPECT_TRUE(same_bits(x.dense_o(a, l), a.down(o)));
  EXPECT_TRUE(same_bits(a.down(sko2), a.down(sko)));
  EXPECT_TRUE(same_bits(a.down(svo2), a.down(svo)));
}

// A step (T = 1) with strided q, k, v and o against the dense step: o and the states.
template <typename Arena, typename Case, typename Step>
void check_step_layout(Arena &a, fsattn_exec exec, const Case &c, Step step) {
  const auto &s = c.s;
  ASSERT_EQ(s.T, 1);
  const auto p = params_in(a, c);
  fsattn_dims dims = c.dims();
  float *sk = a.up(c.state_k), *sv = a.up(c.state_v), *o = a.out(size_t(s.B * s.H * s.Dv));
  ASSERT_EQ(step(&exec, &dims, &p, a.up(c.q), a.up(c.k), a.up(c.v), sk, sv, o), FSATTN_OK) << fsattn_last_error();

  const ForwardLayout l(s.B, 1, s.H, s.Dk, s.Dv);
  const fsattn_layout layout = l.layout();
  dims.layout = &layout;
  const StridedForward<Arena> x(a, l, c.q, c.k, c.v);
  float *sk2 = a.up(c.state_k), *sv2 = a.up(c.state_v);
  ASSERT_EQ(step(&exec, &dims, &p, x.qk + l.q.offset, x.qk + l.k.offset, x.v, sk2, sv2, x.o), FSATTN_OK)
      << fsattn_last_error();
  EXPECT_TRUE(same_bits(x.dense_o(a, l), a.down(o)));
  EXPECT_TRUE(same_bits(a.down(sk2), a.down(sk)));
  EXPECT_TRUE(same_bits(a.down(sv2), a.down(sv)));
}

// A backward pass with strided activations and gradients against the dense call: dq, dk, dv,
// the parameters' and the initial states' gradients. `backward(exec, dims, p, q, k, v, d_o,
// dq, dk, dv, grads)` makes the call, `grads` naming where the other gradients go (slot 0 or
// 1), and returns them as host vectors by `grads_of(slot)`.
template <typename Arena, typename Case, typename Upstream, typename Backward, typename GradsOf>
void check_backward_layout(Arena &a, fsattn_exec exec, const Case &c, const Upstream &u, Backward backward,
                           GradsOf grads_of) {
  const auto &s = c.s;
  fsattn_dims dims = c.dims();
  const size_t nk = size_t(s.B * s.T * s.H * s.Dk), nv = size_t(s.B * s.T * s.H * s.Dv);
  float *dq = a.out(nk), *dk = a.out(nk), *dv = a.out(nv);
  ASSERT_EQ(backward(&exec, &dims, a.up(c.q), a.up(c.k), a.up(c.v), a.up(u.d_o), dq, dk, dv, 0), FSATTN_OK)
      << fsattn_last_error();

  const BackwardLayout l(s.B, s.T, s.H, s.Dk, s.Dv);
  const fsattn_layout layout = l.layout();
  dims.layout = &layout;
  const StridedBackward<Arena> x(a, l, c.q, c.k, c.v, u.d_o);
  ASSERT_EQ(backward(&exec, &dims, x.qk + l.q.offset, x.qk + l.k.offset, x.v, x.d_o, x.dqk + l.dq.offset,
                     x.dqk + l.dk.offset, x.dv, 1),
            FSATTN_OK)
      << fsattn_last_error();
  const std::vector<std::vector<float>> g = x.dense_grads(a, l);
  EXPECT_TRUE(same_bits(g[0], a.down(dq)));
  EXPECT_TRUE(same_bits(g[1], a.down(dk)));
  EXPECT_TRUE(same_bits(g[2], a.down(dv)));
  const auto dense = grads_of(0), strided = grads_of(1);
  ASSERT_EQ(dense.size(), strided.size());
  for (size_t i = 0; i < dense.size(); ++i) EXPECT_TRUE(same_bits(strided[i], dense[i])) << "gradient " << i;
}

// Each mixer's backward through check_backward_layout: the parameters' and initial states'
// gradients of each call (slot 0 dense, 1 strided) kept in the arena.
template <typename Arena>
void check_ida_backward_layout(Arena &a, fsattn_exec exec, const IdaCase &c) {
  const IdaUpstream u = make_ida_upstream(c, 71, true);
  const auto &s = c.s;
  const fsattn_ida_params p = params_in(a, c);
  const size_t nk = size_t(s.B * s.H * s.M * s.Dk * 2), nv = size_t(s.B * s.H * s.M * s.Dv * 2);
  fsattn_ida_grads g[2];
  float *dski[2], *dsvi[2];
  auto backward = [&](const fsattn_exec *e, const fsattn_dims *d, const float *q, const float *k, const float *v,
                      const float *d_o, float *dq, float *dk, float *dv, int slot) {
    g[slot] = {sizeof(fsattn_ida_grads),          a.out(size_t(s.H * s.Dk)), a.out(size_t(s.H * s.Dk)),
               a.out(size_t(s.H * s.Dv)),         a.out(size_t(s.H * s.Dv)), a.out(size_t(s.H)),
               a.out(size_t(s.H * s.M)),          a.out(size_t(s.H * s.M)),  a.out(size_t(s.H * s.M * 2)),
               a.out(size_t(s.H * s.M * s.M * 2))};
    dski[slot] = a.out(nk), dsvi[slot] = a.out(nv);
    return fsattn_ida_backward(e, d, &p, q, k, v, a.up(c.state_k), a.up(c.state_v), d_o, a.up(u.d_state_k),
                               a.up(u.d_state_v), dq, dk, dv, &g[slot], dski[slot], dsvi[slot]);
  };
  auto grads_of = [&](int slot) {
    const fsattn_ida_grads &x = g[slot];
    std::vector<std::vector<float>> out;
    for (const float *ptr : {x.gk, x.bk, x.gv, x.bv, x.log_dt, x.A_re_log, x.A_im, x.B, x.C})
      out.push_back(a.down(ptr));
    out.push_back(a.down(dski[slot]));
    out.push_back(a.down(dsvi[slot]));
    return out;
  };
  check_backward_layout(a, exec, c, u, backward, grads_of);
}

template <typename Arena>
void check_bla_backward_layout(Arena &a, fsattn_exec exec, const BlaCase &c) {
  const BlaUpstream u = make_bla_upstream(c, 72, true);
  const auto &s = c.s;
  const fsattn_bla_params p = params_in(a, c);
  const size_t nk = size_t(s.B * s.H * s.S * s.Dk), nv = size_t(s.B * s.H * s.S * s.Dv);
  float *dlg[2], *dski[2], *dsvi[2];
  auto backward = [&](const fsattn_exec *e, const fsattn_dims *d, const float *q, const float *k, const float *v,
                      const float *d_o, float *dq, float *dk, float *dv, int slot) {
    dlg[slot] = a.out(size_t(s.H)), dski[slot] = a.out(nk), dsvi[slot] = a.out(nv);
    return fsattn_bla_backward(e, d, &p, q, k, v, a.up(c.state_k), a.up(c.state_v), d_o, a.up(u.d_state_k),
                               a.up(u.d_state_v), dq, dk, dv, dlg[slot], dski[slot], dsvi[slot]);
  };
  auto grads_of = [&](int slot) {
    return std::vector<std::vector<float>>{a.down(dlg[slot]), a.down(dski[slot]), a.down(dsvi[slot])};
  };
  check_backward_layout(a, exec, c, u, backward, grads_of);
}

}  // namespace fsattn::test
