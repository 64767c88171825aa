// fsattn_ida_step and fsattn_bla_step on the CPU (docs/spec.md §5): decoding token by token, and a
// prefill in pieces followed by steps, equal the float64 reference of one forward pass over
// the whole sequence; argument checks; a failed step leaves the states as they were.
#include "expect_match.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace fsattn;
using namespace fsattn::test;

namespace {

constexpr double kTol = 1e-5;  // docs/spec.md §4, as for the forward

// Token t of a [B,T,H,D] tensor as [B,1,H,D].
std::vector<float> token(const Tensor32 &x, int64_t B, int64_t T, int64_t H, int64_t D, int64_t t) {
  return slice_tokens(x, B, T, H, D, t, t + 1).f;
}

// Steps over tokens [t0, T) of case c from the states `sk`, `sv` (updated in place); the
// outputs are joined along T.
template <typename Case, typename Params, typename Step>
std::vector<float> decode(const Case &c, const Params &p, Step step, std::vector<float> &sk, std::vector<float> &sv,
                          int64_t t0, int64_t pos_stride) {
  const auto &s = c.s;
  std::vector<float> o;
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  fsattn_dims dims = c.dims();
  dims.seqlen = 1;
  for (int64_t t = t0; t < s.T; ++t) {
    Params pt = p;
    if constexpr (std::is_same_v<Params, fsattn_bla_params>) pt.pos0 = p.pos0 + t * pos_stride;
    std::vector<float> q = token(c.q, s.B, s.T, s.H, s.Dk, t), k = token(c.k, s.B, s.T, s.H, s.Dk, t);
    std::vector<float> v = token(c.v, s.B, s.T, s.H, s.Dv, t), ot(s.B * s.H * s.Dv, NAN);
    EXPECT_EQ(FSATTN_OK, step(&exec, &dims, &pt, q.data(), k.data(), v.data(), sk.data(), sv.data(), ot.data()))
        << fsattn_last_error();
    o = o.empty() ? ot : join_tokens(o, ot, s.B);
  }
  return o;
}

TEST(IdaStep, TokenByTokenEqualsForward) {
  for (bool with_state : {false, true}) {
    const IdaCase c = make_ida_case({2, 23, 3, 12, 7, 9}, 41, with_state);
    const ref::IdaOutputs want = reference_ida_forward(c);
    std::vector<float> sk = with_state ? c.state_k.f : std::vector<float>(want.state_k.size(), 0.0f);
    std::vector<float> sv = with_state ? c.state_v.f : std::vector<float>(want.state_v.size(), 0.0f);
    const std::vector<float> o = decode(c, c.params(), fsattn_ida_step, sk, sv, 0, 0);
    EXPECT_LE(rel_error(o, want.o), kTol) << with_state;
    EXPECT_LE(rel_error(sk, want.state_k), kTol) << with_state;
    EXPECT_LE(rel_error(sv, want.state_v), kTol) << with_state;
  }
}

// A prompt prefilled in two forward calls (the state passed along), then decoded.
TEST(IdaStep, PrefillThenDecodeEqualsForward) {
  const IdaCase c = make_ida_case({1, 150, 2, 16, 16, 8}, 43, true);
  const ref::IdaOutputs want = reference_ida_forward(c);
  IdaCase a = c, b = c;
  a.s.T = 70, b.s.T = 60;
  a.q = slice_tokens(c.q, 1, 150, 2, 16, 0, 70), a.k = slice_tokens(c.k, 1, 150, 2, 16, 0, 70);
  a.v = slice_tokens(c.v, 1, 150, 2, 16, 0, 70);
  b.q = slice_tokens(c.q, 1, 150, 2, 16, 70, 130), b.k = slice_tokens(c.k, 1, 150, 2, 16, 70, 130);
  b.v = slice_tokens(c.v, 1, 150, 2, 16, 70, 130);
  const IdaResult ra = run_ida_forward(a);
  b.state_k.set(ra.state_k), b.state_v.set(ra.state_v);
  const IdaResult rb = run_ida_forward(b);
  ASSERT_EQ(rb.status, FSATTN_OK) << fsattn_last_error();
  std::vector<float> sk = rb.state_k, sv = rb.state_v;
  const std::vector<float> o_steps = decode(c, c.params(), fsattn_ida_step, sk, sv, 130, 0);
  const std::vector<float> o = join_tokens(join_tokens(ra.o, rb.o, 1), o_steps, 1);
  EXPECT_LE(rel_error(o, want.o), kTol);
  EXPECT_LE(rel_error(sk, want.state_k), kTol);
  EXPECT_LE(rel_error(sv, want.state_v), kTol);
}

TEST(BlaStep, TokenByTokenEqualsForward) {
  for (bool with_state : {false, true}) {
    const BlaCase c = make_bla_case({2, 40, 3, 10, 6, 5, 17.5, 9}, 1000003, 51, 0.9, with_state);
    const ref::BlaOutputs want = reference_bla_forward(c);
    std::vector<float> sk = with_state ? c.state_k.f : std::vector<float>(want.state_k.size(), 0.0f);
    std::vector<float> sv = with_state ? c.state_v.f : std::vector<float>(want.state_v.size(), 0.0f);
    const std::vector<float> o = decode(c, c.params(), fsattn_bla_step, sk, sv, 0, 1);
    EXPECT_LE(rel_error(o, want.o), kTol) << with_state;
    EXPECT_LE(rel_error(sk, want.state_k), kTol) << with_state;
    EXPECT_LE(rel_error(sv, want.state_v), kTol) << with_state;
  }
}

// Prefill in two forward calls with pos0 advanced, then decode with each token's position.
TEST(BlaStep, PrefillThenDecodeEqualsForward) {
  const BlaCase c = make_bla_case({1, 150, 2, 16, 16, 7, 33.3, 15}, 12345, 53, 0.9, true);
  const ref::BlaOutputs want = reference_bla_forward(c);
  BlaCase a = c.tokens(0, 70), b = c.tokens(70, 130);
  const BlaResult ra = run_bla_forward(a);
  b.state_k.set(ra.state_k), b.state_v.set(ra.state_v);
  const BlaResult rb = run_bla_forward(b);
  ASSERT_EQ(rb.status, FSATTN_OK) << fsattn_last_error();
  std::vector<float> sk = rb.state_k, sv = rb.state_v;
  const std::vector<float> o_steps = decode(c, c.params(), fsattn_bla_step, sk, sv, 130, 1);
  const std::vector<float> o = join_tokens(join_tokens(ra.o, rb.o, 1), o_steps, 1);
  EXPECT_LE(rel_error(o, want.o), kTol);
  EXPECT_LE(rel_error(sk, want.state_k), kTol);
  EXPECT_LE(rel_error(sv, want.state_v), kTol);
}

TEST(StepApi, InvalidArgumentsAreRefused) {
  const BlaCase c = make_bla_case({1, 1, 2, 4, 4, 2, 8.0, 5}, 0, 1, 0.9, true);
  const IdaCase ic = make_ida_case({1, 1, 2, 4, 4, 3}, 2, true);
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  std::vector<float> sk = c.state_k.f, sv = c.state_v.f, o(8, 7.0f);
  std::vector<float> isk = ic.state_k.f, isv = ic.state_v.f;
  fsattn_bla_params p = c.params();
  fsattn_ida_params ip = ic.params();
  fsattn_dims two = c.dims();
  two.seqlen = 2;
  EXPECT_EQ(FSATTN_ERROR_INVALID_ARGUMENT,
            fsattn_bla_step(&exec, &two, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), sk.data(), sv.data(), o.data()));
  EXPECT_NE(std::string(fsattn_last_error()).find("seqlen"), std::string::npos) << fsattn_last_error();
  fsattn_dims one = c.dims();
  EXPECT_EQ(FSATTN_ERROR_INVALID_ARGUMENT,
            fsattn_bla_step(&exec, &one, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), nullptr, sv.data(), o.data()));
  EXPECT_NE(std::string(fsattn_last_error()).find("state_k"), std::string::npos) << fsattn_last_error();
  fsattn_dims ione = ic.dims();
  EXPECT_EQ(FSATTN_ERROR_INVALID_ARGUMENT,
            fsattn_ida_step(&exec, &ione, &ip, ic.q.ptr(), ic.k.ptr(), ic.v.ptr(), isk.data(), nullptr, o.data()));
  EXPECT_NE(std::string(fsattn_last_error()).find("fsattn_ida_step"), std::string::npos) << fsattn_last_error();
  EXPECT_EQ(sk, c.state_k.f);
  EXPECT_EQ(isk, ic.state_k.f);
  EXPECT_EQ(o, std::vector<float>(8, 7.0f));
}

// A step that runs out of memory returns the error with o NaN and the states untouched.
TEST(StepApi, FailedStepKeepsStates) {
  const IdaCase c = make_ida_case({2, 1, 2, 8, 8, 4}, 3, true);
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  fsattn_dims dims = c.dims();
  fsattn_ida_params p = c.params();
  std::vector<float> sk = c.state_k.f, sv = c.state_v.f, o(2 * 2 * 8, 1.0f);
  fsattn_set_workspace_limit(1);
  const fsattn_status st =
      fsattn_ida_step(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), sk.data(), sv.data(), o.data());
  fsattn_set_workspace_limit(0);
  ASSERT_EQ(st, FSATTN_ERROR_OUT_OF_MEMORY);
  for (float e : o) EXPECT_TRUE(std::isnan(e));
  EXPECT_EQ(sk, c.state_k.f);
  EXPECT_EQ(sv, c.state_v.f);
}

}  // namespace
