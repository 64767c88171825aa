// Checks of the float64 reference itself, against forms of SPEC.md it does not use.
#include "test_util.h"

#include <gtest/gtest.h>

#include <complex>

using namespace fsattn;
using namespace fsattn::test;

// The reference reads out through w = G p with G = C^T C. SPEC.md §1 defines the readout as
// o_t = Re(fq^T U^T Γ) with U = C Xk, Γ = C Xv: check the two agree, with the states of the
// reference recomputed here by the recurrence.
TEST(IdaReference, MatchesLiteralReadout) {
  using cd = std::complex<double>;
  const ref::IdaShape s{1, 9, 2, 5, 4, 3};
  IdaCase c = make_ida_case(s, 11, true);
  ref::IdaOutputs got = reference_ida_forward(c);
  double max_err = 0;
  for (int64_t h = 0; h < s.H; ++h) {
    for (int64_t T = 1; T <= s.T; ++T) {
      // The state after T tokens: the reference run on the first T tokens.
      IdaCase prefix = c;
      prefix.s.T = T;
      auto cut = [&](const Tensor32 &x, int64_t D) {
        Tensor32 y;
        y.set(std::vector<float>(x.f.begin(), x.f.begin() + T * s.H * D));
        return y;
      };
      prefix.q = cut(c.q, s.Dk);
      prefix.k = cut(c.k, s.Dk);
      prefix.v = cut(c.v, s.Dv);
      ref::IdaOutputs st = reference_ida_forward(prefix);
      const int64_t t = T - 1, M = s.M;
      // fq_t, by the feature map of SPEC.md §1
      std::vector<double> fq(s.Dk);
      double ss = 0;
      for (int64_t r = 0; r < s.Dk; ++r) {
        double x = c.q.d[(t * s.H + h) * s.Dk + r];
        fq[r] = x / (1 + std::exp(-x));
        ss += fq[r] * fq[r];
      }
      for (double &e : fq) e /= std::sqrt(ss + c.eps);
      auto C = [&](int64_t row, int64_t col) {
        const double *e = &c.C.d[((h * M + row) * M + col) * 2];
        return cd(e[0], e[1]);
      };
      auto X = [&](const std::vector<double> &state, int64_t D, int64_t m, int64_t r) {
        const double *e = &state[(((h * M) + m) * D + r) * 2];
        return cd(e[0], e[1]);
      };
      for (int64_t col = 0; col < s.Dv; ++col) {
        cd acc = 0;
        for (int64_t j = 0; j < M; ++j) {
          cd u = 0, g = 0;  // (U fq)_j and Γ[j, col]
          for (int64_t m = 0; m < M; ++m) {
            for (int64_t r = 0; r < s.Dk; ++r) u += C(j, m) * X(st.state_k, s.Dk, m, r) * fq[r];
            g += C(j, m) * X(st.state_v, s.Dv, m, col);
          }
          acc += u * g;
        }
        double want = acc.real(), have = got.o[(t * s.H + h) * s.Dv + col];
        max_err = std::max(max_err, std::abs(want - have) / (1e-12 + std::abs(want)));
      }
    }
  }
  EXPECT_LE(max_err, 1e-10);
}
