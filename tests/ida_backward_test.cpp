// fsattn_ida_backward on the CPU against the float64 reference gradients (docs/spec.md §1, §4),
// which reference_test checks against finite differences; determinism, NULL gradients and
// the argument checks the backward adds to the forward's.
#include "expect_match.h"
#include "shapes.h"

#include <gtest/gtest.h>

using namespace fsattn;
using namespace fsattn::test;

namespace {

constexpr double kGradTol = 1e-4;  // docs/spec.md §4

using Shape = IdaShapeCase;

const auto &kShapes = kIdaBackwardShapes;  // shapes.h

// with_state: random initial states and final-state gradients; else both NULL.
class IdaBackward : public ::testing::TestWithParam<std::tuple<Shape, std::string, bool>> {};

TEST_P(IdaBackward, MatchesReference) {
  const auto &[shape, variant, with_state] = GetParam();
  IdaCase c = make_ida_case(shape.s, 555 + shape.s.T, with_state);
  IdaUpstream u = make_ida_upstream(c, 66 + shape.s.T, with_state);
  expect_ida_grads_match(run_ida_backward(c, u, variant.c_str()), reference_ida_backward(c, u), kGradTol, variant);
}

INSTANTIATE_TEST_SUITE_P(Cpu, IdaBackward,
                         ::testing::Combine(::testing::ValuesIn(kShapes),
                                            ::testing::ValuesIn(cpu_variants(FSATTN_OP_IDA_BACKWARD, Schedules::kHand)),
                                            ::testing::Bool()),
                         ShapeVariantStateName());

// The autoscheduled baselines compute the gradients the default schedule computes, at the
// benchmark shape they are built for.
TEST(IdaBackwardBaselines, MatchDefaultSchedule) {
  if (!has_baselines(FSATTN_DEVICE_CPU)) GTEST_SKIP() << kNoBaselines;
  IdaCase c = make_ida_case({2, 2048, 4, 64, 64, 64}, 19, true);  // the benchmark shape
  IdaUpstream u = make_ida_upstream(c, 20, true);
  const IdaGradResult want = run_ida_backward(c, u);
  ASSERT_EQ(want.status, FSATTN_OK) << fsattn_last_error();
  for (const std::string &v : cpu_variants(FSATTN_OP_IDA_BACKWARD, Schedules::kBaselines)) {
    expect_ida_grads_match(run_ida_backward(c, u, v.c_str()), want, kGradTol, v);
  }
}

// Initial states given but no final-state gradients, and the reverse.
TEST(IdaBackwardProperties, MixedStateArguments) {
  for (bool states : {true, false}) {
    IdaCase c = make_ida_case({2, 90, 3, 10, 6, 5}, 31, states);
    IdaUpstream u = make_ida_upstream(c, 32, !states);
    expect_ida_grads_match(run_ida_backward(c, u), reference_ida_backward(c, u), kGradTol, states ? "states" : "seeds");
  }
}

// Two runs give bitwise-identical gradients (no reduction whose order can change).
TEST(IdaBackwardProperties, Deterministic) {
  IdaCase c = make_ida_case({3, 300, 4, 32, 32, 16}, 7, true);
  IdaUpstream u = make_ida_upstream(c, 8, true);
  IdaGradResult a = run_ida_backward(c, u), b = run_ida_backward(c, u);
  ASSERT_EQ(a.status, FSATTN_OK) << fsattn_last_error();
  ASSERT_EQ(b.status, FSATTN_OK) << fsattn_last_error();
  for (auto [x, y] :
       {std::pair(&a.q, &b.q), std::pair(&a.k, &b.k), std::pair(&a.v, &b.v), std::pair(&a.gk, &b.gk),
        std::pair(&a.bk, &b.bk), std::pair(&a.gv, &b.gv), std::pair(&a.bv, &b.bv), std::pair(&a.log_dt, &b.log_dt),
        std::pair(&a.A_re_log, &b.A_re_log), std::pair(&a.A_im, &b.A_im), std::pair(&a.B, &b.B), std::pair(&a.C, &b.C),
        std::pair(&a.state_k, &b.state_k), std::pair(&a.state_v, &b.state_v)}) {
    EXPECT_EQ(*x, *y);
  }
}

// NULL parameter gradients (all, or some) and NULL initial-state gradients are not written;
// the others are unchanged by that.
TEST(IdaBackwardProperties, NullGradientsAreSkipped) {
  IdaCase c = make_ida_case({1, 40, 2, 8, 8, 4}, 3, true);
  IdaUpstream u = make_ida_upstream(c, 4, true);
  IdaGradResult full = run_ida_backward(c, u);
  ASSERT_EQ(full.status, FSATTN_OK) << fsattn_last_error();
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  fsattn_dims dims = c.dims();
  fsattn_ida_params p = c.params();
  for (bool some : {false, true}) {
    IdaGradResult r = full;
    std::vector<float> C_before(r.C.size(), 7.0f);
    r.C = C_before;
    fsattn_ida_grads dp = r.params();
    dp.C = nullptr;
    ASSERT_EQ(FSATTN_OK,
              fsattn_ida_backward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), c.state_k.ptr(), c.state_v.ptr(),
                                  u.d_o.ptr(), u.d_state_k.ptr(), u.d_state_v.ptr(), r.q.data(), r.k.data(), r.v.data(),
                                  some ? &dp : nullptr, nullptr, nullptr))
        << fsattn_last_error();
    EXPECT_EQ(r.q, full.q);
    EXPECT_EQ(r.k, full.k);
    EXPECT_EQ(r.v, full.v);
    EXPECT_EQ(r.C, C_before);
    if (some) {
      EXPECT_EQ(r.A_im, full.A_im);
      EXPECT_EQ(r.B, full.B);
    }
  }
}

// The initial-state gradients may be written over the final-state gradients: the same
// values as into separate memory.
TEST(IdaBackwardProperties, StateGradientsInPlace) {
  IdaCase c = make_ida_case({2, 70, 2, 8, 12, 5}, 13, true);
  IdaUpstream u = make_ida_upstream(c, 14, true);
  IdaGradResult want = run_ida_backward(c, u);
  ASSERT_EQ(want.status, FSATTN_OK) << fsattn_last_error();
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  fsattn_dims dims = c.dims();
  fsattn_ida_params p = c.params();
  IdaGradResult r = want;
  fsattn_ida_grads dp = r.params();
  std::vector<float> seed_k = u.d_state_k.f, seed_v = u.d_state_v.f;
  ASSERT_EQ(FSATTN_OK, fsattn_ida_backward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), c.state_k.ptr(),
                                           c.state_v.ptr(), u.d_o.ptr(), seed_k.data(), seed_v.data(), r.q.data(),
                                           r.k.data(), r.v.data(), &dp, seed_k.data(), seed_v.data()))
      << fsattn_last_error();
  EXPECT_EQ(seed_k, want.state_k);
  EXPECT_EQ(seed_v, want.state_v);
}

// The backward checks what the forward checks, plus its own pointers; a refused call
// writes nothing.
TEST(IdaBackwardApi, InvalidArgumentsAreRefused) {
  IdaCase c = make_ida_case({1, 10, 2, 4, 4, 3}, 1, true);
  IdaUpstream u = make_ida_upstream(c, 2, true);
  struct Bad {
    const char *what, *message;
    void (*mutate)(fsattn_dims &, fsattn_ida_params &, const float *&, float *&);
  };
  const Bad cases[] = {
      {"null d_o", "d_o", [](fsattn_dims &, fsattn_ida_params &, const float *&d_o, float *&) { d_o = nullptr; }},
      {"null dq", "dq", [](fsattn_dims &, fsattn_ida_params &, const float *&, float *&dq) { dq = nullptr; }},
      {"zero modes", "modes", [](fsattn_dims &, fsattn_ida_params &p, const float *&, float *&) { p.modes = 0; }},
      {"null C", "p->C", [](fsattn_dims &, fsattn_ida_params &p, const float *&, float *&) { p.C = nullptr; }},
      {"zero dk", "dk", [](fsattn_dims &d, fsattn_ida_params &, const float *&, float *&) { d.dk = 0; }},
  };
  for (const Bad &bad : cases) {
    fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
    fsattn_dims dims = c.dims();
    fsattn_ida_params p = c.params();
    IdaGradResult r = run_ida_backward(c, u);  // for its buffers' sizes
    std::vector<std::vector<float> *> all{&r.q,      &r.k,        &r.v,    &r.gk, &r.bk, &r.gv,      &r.bv,
                                          &r.log_dt, &r.A_re_log, &r.A_im, &r.B,  &r.C,  &r.state_k, &r.state_v};
    for (auto *g : all) g->assign(g->size(), 7.0f);
    const float *d_o = u.d_o.ptr();
    float *dq = r.q.data();
    bad.mutate(dims, p, d_o, dq);
    fsattn_ida_grads dp = r.params();
    EXPECT_EQ(FSATTN_ERROR_INVALID_ARGUMENT,
              fsattn_ida_backward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), c.state_k.ptr(), c.state_v.ptr(),
                                  d_o, u.d_state_k.ptr(), u.d_state_v.ptr(), dq, r.k.data(), r.v.data(), &dp,
                                  r.state_k.data(), r.state_v.data()))
        << bad.what;
    const std::string message = fsattn_last_error();
    EXPECT_NE(message.find("fsattn_ida_backward"), std::string::npos) << bad.what << ": " << message;
    EXPECT_NE(message.find(bad.message), std::string::npos) << bad.what << ": " << message;
    for (auto *g : all) EXPECT_EQ(*g, std::vector<float>(g->size(), 7.0f)) << bad.what << ": a refused call wrote";
  }
}

}  // namespace
