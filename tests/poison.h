// The locality of non-finite inputs, checked on any device: check_poison runs a forward
// pass (`run`, on a case like `clean_case`) with a NaN or Inf in one element of q, k or v.
#pragma once

#include "cases.h"

#include <gtest/gtest.h>

#include <cmath>

namespace fsattn::test {

inline bool all_finite(const std::vector<float> &x) {
  for (float e : x)
    if (!std::isfinite(e)) return false;
  return true;
}

// A NaN or Inf in q, k or v reaches exactly the outputs that depend on it: for q, that token's
// output; for k and v, that token's and every later token's of the same sequence and head,
// and the final state. Every other output is bitwise what a clean input gives.
struct Poison {
  char tensor;  // 'q', 'k' or 'v'
  float value;
};

template <typename Case, typename Run>
inline void check_poison(const Case &clean_case, Run run) {
  const auto &s = clean_case.s;
  const int64_t b0 = s.B - 1, t0 = s.T / 2 + 3, h0 = s.H - 1;
  const auto clean = run(clean_case);
  ASSERT_EQ(clean.status, FSATTN_OK) << fsattn_last_error();
  ASSERT_TRUE(all_finite(clean.o));
  for (Poison p : {Poison{'q', NAN}, Poison{'k', NAN}, Poison{'v', NAN}, Poison{'q', INFINITY}, Poison{'k', -INFINITY},
                   Poison{'v', INFINITY}}) {
    Case c = clean_case;
    Tensor32 &x = p.tensor == 'q' ? c.q : p.tensor == 'k' ? c.k : c.v;
    const int64_t D = p.tensor == 'v' ? s.Dv : s.Dk;
    std::vector<float> f = x.f;
    f[((b0 * s.T + t0) * s.H + h0) * D + 1] = p.value;
    x.set(f);
    const auto got = run(c);
    ASSERT_EQ(got.status, FSATTN_OK) << fsattn_last_error();
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t t = 0; t < s.T; ++t)
        for (int64_t h = 0; h < s.H; ++h) {
          const bool affected = b == b0 && h == h0 && (p.tensor == 'q' ? t == t0 : t >= t0);
          const size_t at = ((b * s.T + t) * s.H + h) * s.Dv;
          const std::vector<float> row(got.o.begin() + at, got.o.begin() + at + s.Dv);
          const std::vector<float> want(clean.o.begin() + at, clean.o.begin() + at + s.Dv);
          if (affected && t == t0) {
            EXPECT_FALSE(all_finite(row)) << p.tensor << "=" << p.value << " t=" << t;
          } else if (!affected) {
            ASSERT_EQ(row, want) << p.tensor << "=" << p.value << " b=" << b << " t=" << t << " h=" << h;
          }
        }
    // The key state depends on k only, the value state on v only.
    if (p.tensor == 'k')
      EXPECT_FALSE(all_finite(got.state_k));
    else
      EXPECT_EQ(got.state_k, clean.state_k);
    if (p.tensor == 'v')
      EXPECT_FALSE(all_finite(got.state_v));
    else
      EXPECT_EQ(got.state_v, clean.state_v);
  }
}

}  // namespace fsattn::test
