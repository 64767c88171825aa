// fsattn_ida_forward on the CPU against the float64 reference (docs/spec.md §1, §3, §4).
#include "expect_match.h"
#include "shapes.h"

#include <gtest/gtest.h>

#include <cstring>

using namespace fsattn;
using namespace fsattn::test;

namespace {

constexpr double kForwardTol = 1e-5;  // docs/spec.md §4

using Shape = IdaShapeCase;

const auto &kShapes = kIdaForwardShapes;  // shapes.h

class IdaForward : public ::testing::TestWithParam<std::tuple<Shape, std::string, bool>> {};

TEST_P(IdaForward, MatchesReference) {
  const auto &[shape, variant, with_state] = GetParam();
  IdaCase c = make_ida_case(shape.s, 1234 + shape.s.T, with_state);
  expect_match(run_ida_forward(c, variant.c_str()), reference_ida_forward(c), kForwardTol, variant);
}

INSTANTIATE_TEST_SUITE_P(Cpu, IdaForward,
                         ::testing::Combine(::testing::ValuesIn(kShapes),
                                            ::testing::ValuesIn(cpu_variants(FSATTN_OP_IDA_FORWARD, Schedules::kHand)),
                                            ::testing::Bool()),
                         ShapeVariantStateName());

// The autoscheduled baselines compute the same function at the benchmark shape they are built for.
TEST(IdaForwardBaselines, MatchReference) {
  if (!has_baselines(FSATTN_DEVICE_CPU)) GTEST_SKIP() << kNoBaselines;
  IdaCase c = make_ida_case({2, 2048, 4, 64, 64, 64}, 17, true);  // the benchmark shape, which baselines are built for
  ref::IdaOutputs want = reference_ida_forward(c);
  for (const std::string &v : cpu_variants(FSATTN_OP_IDA_FORWARD, Schedules::kBaselines)) {
    expect_match(run_ida_forward(c, v.c_str()), want, kForwardTol, v);
  }
}

// Every chunk length computes the same function: the variants agree with each other.
TEST(IdaForwardProperties, ChunkLengthInvariance) {
  IdaCase c = make_ida_case({2, 301, 2, 24, 20, 10}, 7, true);
  auto variants = cpu_variants(FSATTN_OP_IDA_FORWARD, Schedules::kHand);
  ASSERT_GE(variants.size(), 3u);
  IdaResult first = run_ida_forward(c, variants[0].c_str());
  ASSERT_EQ(first.status, FSATTN_OK) << fsattn_last_error();
  for (const std::string &v : variants) expect_match(run_ida_forward(c, v.c_str()), first, kForwardTol, v);
}

// T tokens in one call equal two calls that pass the final state on.
TEST(IdaForwardProperties, StateChaining) {
  for (int64_t split : {1, 40, 77, 99}) {
    IdaCase whole = make_ida_case({2, 100, 3, 12, 9, 6}, 99, true);
    IdaResult all = run_ida_forward(whole);
    ASSERT_EQ(all.status, FSATTN_OK) << fsattn_last_error();

    auto piece = [&](int64_t t0, int64_t len) {
      IdaCase c = whole;
      c.s.T = len;
      std::vector<float> q, k, v;
      const auto &s = whole.s;
      for (int64_t b = 0; b < s.B; ++b) {
        auto cut = [&](const std::vector<float> &x, int64_t D, std::vector<float> &out) {
          auto first = x.begin() + ((b * s.T + t0) * s.H) * D;
          out.insert(out.end(), first, first + len * s.H * D);
        };
        cut(whole.q.f, s.Dk, q);
        cut(whole.k.f, s.Dk, k);
        cut(whole.v.f, s.Dv, v);
      }
      c.q.set(q);
      c.k.set(k);
      c.v.set(v);
      return c;
    };
    IdaCase a = piece(0, split);
    IdaResult ra = run_ida_forward(a);
    ASSERT_EQ(ra.status, FSATTN_OK) << fsattn_last_error();
    IdaCase b = piece(split, whole.s.T - split);
    b.state_k.set(ra.state_k);
    b.state_v.set(ra.state_v);
    IdaResult rb = run_ida_forward(b);
    ASSERT_EQ(rb.status, FSATTN_OK) << fsattn_last_error();

    std::vector<float> joined;
    const auto &s = whole.s;
    for (int64_t bb = 0; bb < s.B; ++bb) {
      auto row = [&](const std::vector<float> &x, int64_t len, int64_t t) {
        return x.begin() + ((bb * len + t) * s.H) * s.Dv;
      };
      joined.insert(joined.end(), row(ra.o, split, 0), row(ra.o, split, split));
      joined.insert(joined.end(), row(rb.o, s.T - split, 0), row(rb.o, s.T - split, s.T - split));
    }
    EXPECT_LE(rel_error(joined, all.o), kForwardTol) << "split at " << split;
    EXPECT_LE(rel_error(rb.state_k, all.state_k), kForwardTol) << "split at " << split;
    EXPECT_LE(rel_error(rb.state_v, all.state_v), kForwardTol) << "split at " << split;
  }
}

// Outputs are bitwise identical from run to run (docs/spec.md §4).
TEST(IdaForwardProperties, Deterministic) {
  IdaCase c = make_ida_case({2, 513, 4, 32, 32, 16}, 5, true);
  IdaResult a = run_ida_forward(c), b = run_ida_forward(c);
  ASSERT_EQ(a.status, FSATTN_OK);
  ASSERT_EQ(b.status, FSATTN_OK);
  EXPECT_EQ(0, std::memcmp(a.o.data(), b.o.data(), a.o.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(a.state_k.data(), b.state_k.data(), a.state_k.size() * sizeof(float)));
}

// Releasing the cached workspace between calls changes nothing.
TEST(IdaForwardProperties, WorkspaceRelease) {
  IdaCase c = make_ida_case({2, 200, 2, 16, 16, 8}, 8, true);
  IdaResult a = run_ida_forward(c);
  fsattn_release_workspace();
  IdaResult b = run_ida_forward(c);
  ASSERT_EQ(a.status, FSATTN_OK);
  ASSERT_EQ(b.status, FSATTN_OK);
  EXPECT_EQ(0, std::memcmp(a.o.data(), b.o.data(), a.o.size() * sizeof(float)));
}

// NULL final states are not written; NULL initial states are zero.
TEST(IdaForwardProperties, NullStates) {
  IdaCase c = make_ida_case({1, 50, 2, 8, 8, 4}, 3, false);
  IdaResult full = run_ida_forward(c);
  ASSERT_EQ(full.status, FSATTN_OK);
  std::vector<float> o(full.o.size());
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  fsattn_dims dims = c.dims();
  fsattn_ida_params p = c.params();
  ASSERT_EQ(FSATTN_OK, fsattn_ida_forward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), nullptr, nullptr, o.data(),
                                          nullptr, nullptr))
      << fsattn_last_error();
  EXPECT_EQ(0, std::memcmp(o.data(), full.o.data(), o.size() * sizeof(float)));
  // An explicit zero state equals a NULL one.
  c.state_k.set(std::vector<float>(full.state_k.size(), 0.0f));
  c.state_v.set(std::vector<float>(full.state_v.size(), 0.0f));
  IdaResult zero = run_ida_forward(c);
  EXPECT_EQ(0, std::memcmp(zero.o.data(), full.o.data(), o.size() * sizeof(float)));
}

}  // namespace
