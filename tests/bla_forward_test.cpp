// fsattn_bla_forward and fsattn_bla_interpolate on the CPU against the float64 reference
// (docs/spec.md §2, §3, §4), and the properties of docs/spec.md §2 checked on the kernels themselves.
#include "expect_match.h"
#include "shapes.h"

#include <gtest/gtest.h>

using namespace fsattn;
using namespace fsattn::test;

namespace {

constexpr double kForwardTol = 1e-5;  // docs/spec.md §4

using Shape = BlaShapeCase;

const auto &kShapes = kBlaForwardShapes;  // shapes.h

class BlaForward : public ::testing::TestWithParam<std::tuple<Shape, std::string, bool>> {};

TEST_P(BlaForward, MatchesReference) {
  const auto &[shape, variant, with_state] = GetParam();
  BlaCase c = make_bla_case(shape.s, shape.pos0, 4321 + shape.s.T, 0.9, with_state);
  expect_match(run_bla_forward(c, variant.c_str()), reference_bla_forward(c), kForwardTol, variant);
}

INSTANTIATE_TEST_SUITE_P(Cpu, BlaForward,
                         ::testing::Combine(::testing::ValuesIn(kShapes),
                                            ::testing::ValuesIn(cpu_variants(FSATTN_OP_BLA_FORWARD, Schedules::kHand)),
                                            ::testing::Bool()),
                         ShapeVariantStateName());

// The autoscheduled baselines compute the same function at the benchmark shape they are built for.
TEST(BlaForwardBaselines, MatchReference) {
  if (!has_baselines(FSATTN_DEVICE_CPU)) GTEST_SKIP() << kNoBaselines;
  BlaCase c = make_bla_case({2, 2048, 4, 64, 64, 31, 256.0, 64}, 77, 17, 0.95, true);  // the benchmark shape
  ref::BlaOutputs want = reference_bla_forward(c);
  for (const std::string &v : cpu_variants(FSATTN_OP_BLA_FORWARD, Schedules::kBaselines)) {
    expect_match(run_bla_forward(c, v.c_str()), want, kForwardTol, v);
  }
}

// At other sizes the runtime refuses them, before a kernel runs: 63 slots, then 3 heads.
TEST(BlaForwardBaselines, RefuseOtherSizes) {
  if (!has_baselines(FSATTN_DEVICE_CPU)) GTEST_SKIP() << kNoBaselines;
  for (const ref::BlaShape &s :
       {ref::BlaShape{1, 64, 4, 64, 64, 31, 256.0, 63}, ref::BlaShape{1, 64, 3, 64, 64, 31, 256.0, 64}}) {
    const BlaCase c = make_bla_case(s, 0, 5, 0.9, false);
    for (const std::string &v : cpu_variants(FSATTN_OP_BLA_FORWARD, Schedules::kBaselines)) {
      EXPECT_EQ(run_bla_forward(c, v.c_str()).status, FSATTN_ERROR_UNSUPPORTED) << v;
      EXPECT_NE(std::string(fsattn_last_error()).find("autoscheduled baseline"), std::string::npos) << v;
    }
  }
}

// Every chunk length gives the same result, up to float32 rounding.
TEST(BlaForwardProperties, ChunkLengthInvariance) {
  BlaCase c = make_bla_case({2, 300, 2, 16, 8, 7, 50.5, 15}, 9, 91, 0.9, true);
  const std::vector<std::string> variants = cpu_variants(FSATTN_OP_BLA_FORWARD, Schedules::kHand);
  if (variants.size() < 2) GTEST_SKIP() << "one chunk length in this build (FSATTN_VARIANTS=all builds more)";
  BlaResult first = run_bla_forward(c, variants[0].c_str());
  ASSERT_EQ(first.status, FSATTN_OK) << fsattn_last_error();
  for (const std::string &v : variants) expect_match(run_bla_forward(c, v.c_str()), first, 2e-6, v);
}

// T tokens in one call equal three calls passing the state along with pos0 advanced
// (cuts inside and at chunk boundaries, non-integer W).
TEST(BlaForwardProperties, StateChaining) {
  const BlaCase c = make_bla_case({2, 200, 3, 8, 12, 6, 33.3, 13}, 1234567, 101, 0.9, true);
  BlaResult whole = run_bla_forward(c);
  ASSERT_EQ(whole.status, FSATTN_OK) << fsattn_last_error();
  for (auto [cut1, cut2] : {std::pair<int64_t, int64_t>{1, 64}, {37, 150}, {128, 199}}) {
    BlaCase a = c.tokens(0, cut1), b = c.tokens(cut1, cut2), d = c.tokens(cut2, c.s.T);
    BlaResult ra = run_bla_forward(a);
    b.state_k.set(ra.state_k), b.state_v.set(ra.state_v);
    BlaResult rb = run_bla_forward(b);
    d.state_k.set(rb.state_k), d.state_v.set(rb.state_v);
    BlaResult rd = run_bla_forward(d);
    ASSERT_EQ(rd.status, FSATTN_OK) << fsattn_last_error();
    const std::vector<float> o = join_tokens(join_tokens(ra.o, rb.o, c.s.B), rd.o, c.s.B);
    EXPECT_LE(rel_error(o, whole.o), 2e-6) << cut1 << "," << cut2;
    EXPECT_LE(rel_error(rd.state_k, whole.state_k), 2e-6) << cut1 << "," << cut2;
    EXPECT_LE(rel_error(rd.state_v, whole.state_v), 2e-6) << cut1 << "," << cut2;
  }
}

// W = S = 2M+1, γ = 1, T <= W: causal softmax attention over the tokens plus empty slots.
TEST(BlaForwardProperties, ExactWindowIsCausalSoftmax) {
  for (int64_t pos0 : {0, 5, 1000}) {
    const ref::BlaShape s{2, 31, 2, 16, 8, /*M=*/15, /*W=*/31.0, /*S=*/31};
    BlaCase c = make_bla_case(s, pos0, 111 + pos0, 1.0, false);
    c.log_gamma.set(std::vector<float>(s.H, 0.0f));
    BlaResult r = run_bla_forward(c);
    ASSERT_EQ(r.status, FSATTN_OK) << fsattn_last_error();
    EXPECT_LE(rel_error(r.o, ref::exact_window_attention(s, c.ref_params().scale, c.q.d, c.k.d, c.v.d)), kForwardTol)
        << "pos0=" << pos0;
  }
}

// The kernel's slot state is the Dirichlet interpolation of the Fourier coefficients.
TEST(BlaForwardProperties, FourierForm) {
  const ref::BlaShape s{2, 150, 2, 5, 3, /*M=*/6, /*W=*/41.7, /*S=*/10};
  BlaCase c = make_bla_case(s, 77, 121, 0.95, false);
  BlaResult r = run_bla_forward(c);
  ASSERT_EQ(r.status, FSATTN_OK) << fsattn_last_error();
  EXPECT_LE(rel_error(r.state_k, ref::fourier_slot_state(s, s.Dk, c.log_gamma.d, c.pos0, c.k.d)), kForwardTol);
  EXPECT_LE(rel_error(r.state_v, ref::fourier_slot_state(s, s.Dv, c.log_gamma.d, c.pos0, c.v.d)), kForwardTol);
}

// φ depends on t mod W only: pos0 = 2^40 gives the result of pos0 = 2^40 mod W (integer W),
// and pos0 = 2^52 - T still matches the reference.
TEST(BlaForwardProperties, LargePositionsReduce) {
  const int64_t big = int64_t(1) << 40;
  const ref::BlaShape s{1, 90, 2, 8, 8, /*M=*/7, /*W=*/48.0, /*S=*/15};
  BlaCase far = make_bla_case(s, big, 131, 0.9, true), near = far;
  near.pos0 = big % 48;
  BlaResult a = run_bla_forward(far), b = run_bla_forward(near);
  ASSERT_EQ(a.status, FSATTN_OK) << fsattn_last_error();
  ASSERT_EQ(b.status, FSATTN_OK) << fsattn_last_error();
  EXPECT_LE(rel_error(a.o, b.o), 1e-6);
  EXPECT_LE(rel_error(a.state_k, b.state_k), 1e-6);
  EXPECT_LE(rel_error(a.state_v, b.state_v), 1e-6);
  BlaCase huge = make_bla_case({1, 90, 2, 8, 8, 7, 37.3, 15}, (int64_t(1) << 52) - 90, 141, 0.9, true);
  BlaResult h = run_bla_forward(huge);
  ASSERT_EQ(h.status, FSATTN_OK) << fsattn_last_error();
  EXPECT_LE(rel_error(h.o, reference_bla_forward(huge).o), kForwardTol);
}

// A final state may overwrite the initial state it was computed from.
TEST(BlaForwardProperties, StateInPlace) {
  BlaCase c = make_bla_case({2, 70, 2, 8, 4, 3, 16.0, 9}, 0, 151, 0.9, true);
  BlaResult want = run_bla_forward(c);
  std::vector<float> sk = c.state_k.f, sv = c.state_v.f, o(want.o.size());
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  fsattn_dims dims = c.dims();
  fsattn_bla_params p = c.params();
  ASSERT_EQ(fsattn_bla_forward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), sk.data(), sv.data(), o.data(),
                               sk.data(), sv.data()),
            FSATTN_OK)
      << fsattn_last_error();
  EXPECT_EQ(o, want.o);
  EXPECT_EQ(sk, want.state_k);
  EXPECT_EQ(sv, want.state_v);
}

// Two runs give bitwise-identical results; NULL states mean zero in and nothing out.
TEST(BlaForwardProperties, DeterministicAndNullStates) {
  BlaCase c = make_bla_case({2, 130, 2, 8, 4, 3, 16.0, 9}, 0, 161, 0.9, false);
  BlaResult a = run_bla_forward(c), b = run_bla_forward(c);
  EXPECT_EQ(a.o, b.o);
  EXPECT_EQ(a.state_k, b.state_k);
  std::vector<float> o(a.o.size());
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  fsattn_dims dims = c.dims();
  fsattn_bla_params p = c.params();
  ASSERT_EQ(fsattn_bla_forward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), nullptr, nullptr, o.data(), nullptr,
                               nullptr),
            FSATTN_OK)
      << fsattn_last_error();
  EXPECT_EQ(o, a.o);
}

// fsattn_bla_interpolate against the reference formula, fractional and negative lags included,
// over a state the forward pass produced (S >= 2M+1 and S < 2M+1).
TEST(BlaInterpolate, MatchesReference) {
  for (const ref::BlaShape &s :
       {ref::BlaShape{2, 300, 3, 24, 24, 15, 64.0, 31}, ref::BlaShape{1, 100, 2, 5, 5, 9, 37.3, 8}}) {
    BlaCase c = make_bla_case(s, 12345, 171, 0.97, false);
    BlaResult r = run_bla_forward(c);
    ASSERT_EQ(r.status, FSATTN_OK) << fsattn_last_error();
    const int64_t position = c.pos0 + s.T - 1;
    std::vector<double> lags;
    for (double l = -2.5; l < 2 * s.W; l += 0.37) lags.push_back(l);
    std::vector<float> out(s.B * s.H * lags.size() * s.Dk, NAN);
    fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
    ASSERT_EQ(fsattn_bla_interpolate(&exec, s.B, s.H, s.Dk, s.M, s.W, s.S, position, lags.data(), int64_t(lags.size()),
                                     r.state_k.data(), out.data()),
              FSATTN_OK)
        << fsattn_last_error();
    const std::vector<double> state(r.state_k.begin(), r.state_k.end());
    EXPECT_LE(rel_error(out, ref::bla_interpolate(s.B, s.H, s.Dk, s.M, s.W, s.S, position, lags, state)), kForwardTol)
        << "S=" << s.S;
  }
}

}  // namespace
