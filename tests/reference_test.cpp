// Checks of the float64 reference itself, against forms of docs/spec.md it does not use.
#include "cases.h"

#include <gtest/gtest.h>

#include <complex>
#include <functional>
#include <random>

using namespace fsattn;
using namespace fsattn::test;

// The reference reads out through w = G p with G = C^T C. docs/spec.md §1 defines the readout as
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
      // fq_t, by the feature map of docs/spec.md §1
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

// The reference's hand-derived gradients against central finite differences of
// L = <d_o, o> + <d_state_k, Xk_T> + <d_state_v, Xv_T>, for every input and parameter, with
// initial states, Dk != Dv and perturbed parameters (docs/spec.md §4: within 1e-6).
TEST(IdaReference, GradientsMatchFiniteDifferences) {
  const ref::IdaShape s{2, 6, 2, 4, 3, 3};
  const IdaCase c = make_ida_case(s, 21, true);
  std::mt19937_64 rng(22);
  const std::vector<double> d_o = random_tensor(rng, s.B * s.T * s.H * s.Dv).d;
  const std::vector<double> d_sk = random_tensor(rng, s.B * s.H * s.M * s.Dk * 2).d;
  const std::vector<double> d_sv = random_tensor(rng, s.B * s.H * s.M * s.Dv * 2).d;
  struct Inputs {
    std::vector<double> q, k, v, state_k, state_v;
    ref::IdaParams p;
  };
  const Inputs x0{c.q.d, c.k.d, c.v.d, c.state_k.d, c.state_v.d, c.ref_params()};
  auto loss = [&](const Inputs &x) {
    const ref::IdaOutputs out = ref::ida_forward(s, x.p, x.q, x.k, x.v, x.state_k, x.state_v);
    double l = 0;
    for (size_t i = 0; i < d_o.size(); ++i) l += d_o[i] * out.o[i];
    for (size_t i = 0; i < d_sk.size(); ++i) l += d_sk[i] * out.state_k[i];
    for (size_t i = 0; i < d_sv.size(); ++i) l += d_sv[i] * out.state_v[i];
    return l;
  };
  const ref::IdaGrads g = ref::ida_backward(s, x0.p, x0.q, x0.k, x0.v, x0.state_k, x0.state_v, d_o, d_sk, d_sv);
  struct Check {
    const char *name;
    std::function<std::vector<double> &(Inputs &)> input;
    const std::vector<double> &analytic;
  };
  const Check checks[] = {
      {"q", [](Inputs &x) -> std::vector<double> & { return x.q; }, g.q},
      {"k", [](Inputs &x) -> std::vector<double> & { return x.k; }, g.k},
      {"v", [](Inputs &x) -> std::vector<double> & { return x.v; }, g.v},
      {"state_k", [](Inputs &x) -> std::vector<double> & { return x.state_k; }, g.state_k},
      {"state_v", [](Inputs &x) -> std::vector<double> & { return x.state_v; }, g.state_v},
      {"gk", [](Inputs &x) -> std::vector<double> & { return x.p.gk; }, g.gk},
      {"bk", [](Inputs &x) -> std::vector<double> & { return x.p.bk; }, g.bk},
      {"gv", [](Inputs &x) -> std::vector<double> & { return x.p.gv; }, g.gv},
      {"bv", [](Inputs &x) -> std::vector<double> & { return x.p.bv; }, g.bv},
      {"log_dt", [](Inputs &x) -> std::vector<double> & { return x.p.log_dt; }, g.log_dt},
      {"A_re_log", [](Inputs &x) -> std::vector<double> & { return x.p.A_re_log; }, g.A_re_log},
      {"A_im", [](Inputs &x) -> std::vector<double> & { return x.p.A_im; }, g.A_im},
      {"B", [](Inputs &x) -> std::vector<double> & { return x.p.B; }, g.B},
      {"C", [](Inputs &x) -> std::vector<double> & { return x.p.C; }, g.C},
  };
  for (const Check &check : checks) {
    Inputs probe = x0;
    std::vector<double> &x = check.input(probe);
    std::vector<double> numeric(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const double h = 1e-6, x_i = x[i];
      x[i] = x_i + h;
      const double plus = loss(probe);
      x[i] = x_i - h;
      const double minus = loss(probe);
      x[i] = x_i;
      numeric[i] = (plus - minus) / (2 * h);
    }
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      num += (check.analytic[i] - numeric[i]) * (check.analytic[i] - numeric[i]);
      den += numeric[i] * numeric[i];
    }
    EXPECT_LE(std::sqrt(num / den), 1e-6) << check.name;
  }
}
