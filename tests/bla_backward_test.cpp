// fsattn_bla_backward on the CPU against the float64 reference gradients (docs/spec.md §2, §4),
// which bla_reference_test checks against finite differences; determinism, and the argument
// checks the backward adds to the forward's.
#include "expect_match.h"
#include "shapes.h"

#include <gtest/gtest.h>

using namespace fsattn;
using namespace fsattn::test;

namespace {

constexpr double kGradTol = 1e-4;  // docs/spec.md §4

using Shape = BlaShapeCase;

const auto &kShapes = kBlaBackwardShapes;  // shapes.h

// with_state: random initial states and final-state gradients; else both NULL.
class BlaBackward : public ::testing::TestWithParam<std::tuple<Shape, std::string, bool>> {};

TEST_P(BlaBackward, MatchesReference) {
  const auto &[shape, variant, with_state] = GetParam();
  BlaCase c = make_bla_case(shape.s, shape.pos0, 777 + shape.s.T, 0.9, with_state);
  BlaUpstream u = make_bla_upstream(c, 99 + shape.s.T, with_state);
  expect_grads_match(run_bla_backward(c, u, variant.c_str()), reference_bla_backward(c, u), kGradTol, variant);
}

INSTANTIATE_TEST_SUITE_P(Cpu, BlaBackward,
                         ::testing::Combine(::testing::ValuesIn(kShapes),
                                            ::testing::ValuesIn(cpu_variants(FSATTN_OP_BLA_BACKWARD, Schedules::kHand)),
                                            ::testing::Bool()),
                         ShapeVariantStateName());

// The autoscheduled baselines compute the gradients the default schedule computes, at the
// benchmark shape they are built for.
TEST(BlaBackwardBaselines, MatchDefaultSchedule) {
  if (!has_baselines(FSATTN_DEVICE_CPU)) GTEST_SKIP() << kNoBaselines;
  BlaCase c = make_bla_case({2, 2048, 4, 64, 64, 31, 256.0, 64}, 77, 17, 0.95, true);  // the benchmark shape
  BlaUpstream u = make_bla_upstream(c, 18, true);
  const BlaGradResult want = run_bla_backward(c, u);
  ASSERT_EQ(want.status, FSATTN_OK) << fsattn_last_error();
  for (const std::string &v : cpu_variants(FSATTN_OP_BLA_BACKWARD, Schedules::kBaselines)) {
    expect_grads_match(run_bla_backward(c, u, v.c_str()), want, kGradTol, v);
  }
}

// Initial states given but no final-state gradients, and the reverse; strong decay (γ down
// to 0.3) and a larger scale, where the softmax is peaked.
TEST(BlaBackwardProperties, MixedStateArguments) {
  for (bool states : {true, false}) {
    BlaCase c = make_bla_case({2, 90, 3, 10, 6, 4, 17.5, 9}, 5, 31, 0.3, states);
    c.scale = 1.5f;
    BlaUpstream u = make_bla_upstream(c, 32, !states);
    expect_grads_match(run_bla_backward(c, u), reference_bla_backward(c, u), kGradTol, states ? "states" : "seeds");
  }
}

// Two runs give bitwise-identical gradients (no reduction whose order can change).
TEST(BlaBackwardProperties, Deterministic) {
  BlaCase c = make_bla_case({3, 300, 4, 32, 32, 15, 64.0, 32}, 12345, 7, 0.9, true);
  BlaUpstream u = make_bla_upstream(c, 8, true);
  BlaGradResult a = run_bla_backward(c, u), b = run_bla_backward(c, u);
  ASSERT_EQ(a.status, FSATTN_OK) << fsattn_last_error();
  ASSERT_EQ(b.status, FSATTN_OK) << fsattn_last_error();
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.k, b.k);
  EXPECT_EQ(a.v, b.v);
  EXPECT_EQ(a.log_gamma, b.log_gamma);
  EXPECT_EQ(a.state_k, b.state_k);
  EXPECT_EQ(a.state_v, b.state_v);
}

// NULL initial-state gradients are not written; the others are unchanged by that.
TEST(BlaBackwardProperties, NullStateGradientsAreSkipped) {
  BlaCase c = make_bla_case({1, 40, 2, 8, 8, 3, 12.0, 7}, 0, 3, 0.9, true);
  BlaUpstream u = make_bla_upstream(c, 4, true);
  BlaGradResult full = run_bla_backward(c, u);
  ASSERT_EQ(full.status, FSATTN_OK) << fsattn_last_error();
  BlaGradResult r = full;
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  fsattn_dims dims = c.dims();
  fsattn_bla_params p = c.params();
  ASSERT_EQ(FSATTN_OK, fsattn_bla_backward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), c.state_k.ptr(),
                                           c.state_v.ptr(), u.d_o.ptr(), u.d_state_k.ptr(), u.d_state_v.ptr(),
                                           r.q.data(), r.k.data(), r.v.data(), r.log_gamma.data(), nullptr, nullptr))
      << fsattn_last_error();
  EXPECT_EQ(r.q, full.q);
  EXPECT_EQ(r.k, full.k);
  EXPECT_EQ(r.v, full.v);
  EXPECT_EQ(r.log_gamma, full.log_gamma);
}

// The initial-state gradients may be written over the final-state gradients (and over the
// initial states): the same values as into separate memory.
TEST(BlaBackwardProperties, StateGradientsInPlace) {
  BlaCase c = make_bla_case({2, 70, 2, 8, 12, 3, 12.0, 7}, 0, 13, 0.9, true);
  BlaUpstream u = make_bla_upstream(c, 14, true);
  BlaGradResult want = run_bla_backward(c, u);
  ASSERT_EQ(want.status, FSATTN_OK) << fsattn_last_error();
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  fsattn_dims dims = c.dims();
  fsattn_bla_params p = c.params();
  BlaGradResult r = want;
  std::vector<float> seed_k = u.d_state_k.f, seed_v = u.d_state_v.f;
  ASSERT_EQ(FSATTN_OK, fsattn_bla_backward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), c.state_k.ptr(),
                                           c.state_v.ptr(), u.d_o.ptr(), seed_k.data(), seed_v.data(), r.q.data(),
                                           r.k.data(), r.v.data(), r.log_gamma.data(), seed_k.data(), seed_v.data()))
      << fsattn_last_error();
  EXPECT_EQ(seed_k, want.state_k);
  EXPECT_EQ(seed_v, want.state_v);
  std::vector<float> state_k = c.state_k.f, state_v = c.state_v.f;
  ASSERT_EQ(FSATTN_OK,
            fsattn_bla_backward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), state_k.data(), state_v.data(),
                                u.d_o.ptr(), u.d_state_k.ptr(), u.d_state_v.ptr(), r.q.data(), r.k.data(), r.v.data(),
                                r.log_gamma.data(), state_k.data(), state_v.data()))
      << fsattn_last_error();
  EXPECT_EQ(state_k, want.state_k);
  EXPECT_EQ(state_v, want.state_v);
}

// The backward checks what the forward checks, plus its own pointers; a refused call
// writes nothing.
TEST(BlaBackwardApi, InvalidArgumentsAreRefused) {
  BlaCase c = make_bla_case({1, 10, 2, 4, 4, 2, 8.0, 5}, 0, 1, 0.9, true);
  BlaUpstream u = make_bla_upstream(c, 2, true);
  struct Bad {
    const char *what, *message;
    void (*mutate)(fsattn_dims &, fsattn_bla_params &, const float *&, float *&, float *&);
  };
  const Bad cases[] = {
      {"null d_o", "d_o",
       [](fsattn_dims &, fsattn_bla_params &, const float *&d_o, float *&, float *&) { d_o = nullptr; }},
      {"null dq", "dq", [](fsattn_dims &, fsattn_bla_params &, const float *&, float *&dq, float *&) { dq = nullptr; }},
      {"null d_log_gamma", "d_log_gamma",
       [](fsattn_dims &, fsattn_bla_params &, const float *&, float *&, float *&dlg) { dlg = nullptr; }},
      {"zero heads", "heads",
       [](fsattn_dims &d, fsattn_bla_params &, const float *&, float *&, float *&) { d.heads = 0; }},
      {"zero slots", "slots",
       [](fsattn_dims &, fsattn_bla_params &p, const float *&, float *&, float *&) { p.slots = 0; }},
      {"negative pos0", "pos0",
       [](fsattn_dims &, fsattn_bla_params &p, const float *&, float *&, float *&) { p.pos0 = -1; }},
      {"NaN period", "period",
       [](fsattn_dims &, fsattn_bla_params &p, const float *&, float *&, float *&) { p.period = NAN; }},
  };
  for (const Bad &bad : cases) {
    fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
    fsattn_dims dims = c.dims();
    fsattn_bla_params p = c.params();
    BlaGradResult r = run_bla_backward(c, u);  // only for its NaN-filled buffers' sizes
    for (auto *g : {&r.q, &r.k, &r.v, &r.log_gamma, &r.state_k, &r.state_v}) g->assign(g->size(), 7.0f);
    const float *d_o = u.d_o.ptr();
    float *dq = r.q.data(), *dlg = r.log_gamma.data();
    bad.mutate(dims, p, d_o, dq, dlg);
    EXPECT_EQ(FSATTN_ERROR_INVALID_ARGUMENT,
              fsattn_bla_backward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), c.state_k.ptr(), c.state_v.ptr(),
                                  d_o, u.d_state_k.ptr(), u.d_state_v.ptr(), dq, r.k.data(), r.v.data(), dlg,
                                  r.state_k.data(), r.state_v.data()))
        << bad.what;
    const std::string message = fsattn_last_error();
    EXPECT_NE(message.find("fsattn_bla_backward"), std::string::npos) << bad.what << ": " << message;
    EXPECT_NE(message.find(bad.message), std::string::npos) << bad.what << ": " << message;
    for (auto *g : {&r.q, &r.k, &r.v, &r.log_gamma, &r.state_k, &r.state_v}) {
      EXPECT_EQ(*g, std::vector<float>(g->size(), 7.0f)) << bad.what << ": a refused call wrote";
    }
  }
}

TEST(BlaBackwardApi, UnknownVariantIsRefused) {
  BlaCase c = make_bla_case({1, 10, 1, 4, 4, 2, 8.0, 5}, 0, 1, 0.9, false);
  BlaUpstream u = make_bla_upstream(c, 2, false);
  BlaGradResult r = run_bla_backward(c, u, "no_such_variant");
  EXPECT_EQ(r.status, FSATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fsattn_last_error()).find("no_such_variant"), std::string::npos) << fsattn_last_error();
}

}  // namespace
