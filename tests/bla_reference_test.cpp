// Checks of the float64 BLA reference itself (SPEC.md §2), against forms of the spec it does
// not use: the exact window, the Fourier form, position reduction, chaining, degenerate sizes.
#include "reference/bla_reference.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <complex>

using namespace fsattn;
using namespace fsattn::test;

namespace {

struct BlaCase {
  ref::BlaShape s;
  ref::BlaParams p;
  std::vector<double> q, k, v, state_k, state_v;  // empty state: zero
  ref::BlaOutputs run() const { return ref::bla_forward(s, p, q, k, v, state_k, state_v); }
};

// Random activations and per-head γ in [gamma_lo, 1]; scale = Dk^-1/2.
BlaCase make_case(ref::BlaShape s, int64_t pos0, uint64_t seed, double gamma_lo, bool with_state) {
  std::mt19937_64 rng(seed);
  BlaCase c;
  c.s = s;
  c.q = random_tensor(rng, s.B * s.T * s.H * s.Dk, -2, 2).d;
  c.k = random_tensor(rng, s.B * s.T * s.H * s.Dk, -2, 2).d;
  c.v = random_tensor(rng, s.B * s.T * s.H * s.Dv, -2, 2).d;
  c.p.log_gamma = random_tensor(rng, s.H, std::log(gamma_lo), 0).d;
  c.p.scale = 1 / std::sqrt(double(s.Dk));
  c.p.pos0 = pos0;
  if (with_state) {
    c.state_k = random_tensor(rng, s.B * s.H * s.S * s.Dk).d;
    c.state_v = random_tensor(rng, s.B * s.H * s.S * s.Dv).d;
  }
  return c;
}

// ||a - b||_F / ||b||_F
double rel_err(const std::vector<double> &a, const std::vector<double> &b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1.0));
}

// Tokens [t0, t1) of a [B,T,H,D] tensor.
std::vector<double> tokens(const std::vector<double> &x, const ref::BlaShape &s, int64_t D, int64_t t0, int64_t t1) {
  std::vector<double> y;
  for (int64_t b = 0; b < s.B; ++b)
    y.insert(y.end(), x.begin() + (b * s.T + t0) * s.H * D, x.begin() + (b * s.T + t1) * s.H * D);
  return y;
}

}  // namespace

// W = S = 2M+1, γ = 1, T ≤ W: every slot holds one token, so BLA is causal softmax attention
// over the real tokens plus the empty slots (key 0, value 0, each adding exp(0) = 1 to the
// denominator). pos0 only rotates which slot a token lands in.
TEST(BlaReference, ExactWindowIsCausalSoftmax) {
  for (int64_t pos0 : {0, 4}) {
    const ref::BlaShape s{2, 7, 2, 5, 4, /*M=*/3, /*W=*/7.0, /*S=*/7};
    BlaCase c = make_case(s, pos0, 21 + pos0, 1.0, false);
    c.p.log_gamma.assign(s.H, 0.0);
    ref::BlaOutputs got = c.run();
    std::vector<double> want(got.o.size()), want_k(got.state_k.size()), want_v(got.state_v.size());
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < s.H; ++h) {
        for (int64_t i = 0; i < s.T; ++i) {
          const double *qi = &c.q[((b * s.T + i) * s.H + h) * s.Dk];
          std::vector<double> e(i + 1);
          double den = double(s.S - i - 1);  // the empty slots
          for (int64_t tau = 0; tau <= i; ++tau) {
            double dot = 0;
            for (int64_t r = 0; r < s.Dk; ++r) dot += qi[r] * c.k[((b * s.T + tau) * s.H + h) * s.Dk + r];
            den += (e[tau] = std::exp(c.p.scale * dot));
          }
          for (int64_t col = 0; col < s.Dv; ++col) {
            double acc = 0;
            for (int64_t tau = 0; tau <= i; ++tau) acc += e[tau] * c.v[((b * s.T + tau) * s.H + h) * s.Dv + col];
            want[((b * s.T + i) * s.H + h) * s.Dv + col] = acc / den;
          }
        }
        // The final slots are the tokens themselves, token τ in slot (pos0 + τ) mod S.
        for (int64_t tau = 0; tau < s.T; ++tau) {
          const int64_t j = (pos0 + tau) % s.S;
          for (int64_t r = 0; r < s.Dk; ++r)
            want_k[((b * s.H + h) * s.S + j) * s.Dk + r] = c.k[((b * s.T + tau) * s.H + h) * s.Dk + r];
          for (int64_t col = 0; col < s.Dv; ++col)
            want_v[((b * s.H + h) * s.S + j) * s.Dv + col] = c.v[((b * s.T + tau) * s.H + h) * s.Dv + col];
        }
      }
    EXPECT_LE(rel_err(got.o, want), 1e-10) << "pos0=" << pos0;
    // Slot values are sums of cosines that cancel to ~1e-16, so compare absolutely.
    for (size_t e = 0; e < want_k.size(); ++e) ASSERT_NEAR(got.state_k[e], want_k[e], 1e-12);
    for (size_t e = 0; e < want_v.size(); ++e) ASSERT_NEAR(got.state_v[e], want_v[e], 1e-12);
  }
}

// The slots are the Dirichlet interpolation of the Fourier coefficients
// F_t[m] = γ F_{t−1}[m] + e^{−iω_m t} k_t: Ks_t[j] = (1/W) Re Σ_m e^{iω_m a_j} F_t[m].
// Non-integer W, S ≠ 2M+1, γ < 1, pos0 > 0; checked after every token (prefix runs).
TEST(BlaReference, MatchesFourierForm) {
  using cd = std::complex<double>;
  const ref::BlaShape s{2, 20, 2, 3, 2, /*M=*/4, /*W=*/37.5, /*S=*/6};
  const BlaCase c = make_case(s, /*pos0=*/13, 31, 0.8, false);
  const int64_t M = s.M;
  double max_err = 0;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      const double gamma = std::exp(c.p.log_gamma[h]);
      // F[m + M][r] for keys (Dk channels) then values (Dv channels), side by side.
      const int64_t D = s.Dk + s.Dv;
      std::vector<cd> F((2 * M + 1) * D, 0.0);
      for (int64_t i = 0; i < s.T; ++i) {
        const double t = double(c.p.pos0 + i);
        for (int64_t m = -M; m <= M; ++m) {
          const cd rot = std::polar(1.0, -2 * M_PI * double(m) / s.W * t);
          for (int64_t r = 0; r < D; ++r) {
            const double x = r < s.Dk ? c.k[((b * s.T + i) * s.H + h) * s.Dk + r]
                                      : c.v[((b * s.T + i) * s.H + h) * s.Dv + (r - s.Dk)];
            F[(m + M) * D + r] = gamma * F[(m + M) * D + r] + rot * x;
          }
        }
        // The reference's state after the first i+1 tokens.
        BlaCase prefix = c;
        prefix.s.T = i + 1;
        prefix.q = tokens(c.q, s, s.Dk, 0, i + 1);
        prefix.k = tokens(c.k, s, s.Dk, 0, i + 1);
        prefix.v = tokens(c.v, s, s.Dv, 0, i + 1);
        const ref::BlaOutputs got = prefix.run();
        for (int64_t j = 0; j < s.S; ++j) {
          const double a = double(j) * s.W / double(s.S);
          for (int64_t r = 0; r < D; ++r) {
            cd acc = 0;
            for (int64_t m = -M; m <= M; ++m) acc += std::polar(1.0, 2 * M_PI * double(m) / s.W * a) * F[(m + M) * D + r];
            const double want = acc.real() / s.W;
            const double have = r < s.Dk ? got.state_k[((b * s.H + h) * s.S + j) * s.Dk + r]
                                         : got.state_v[((b * s.H + h) * s.S + j) * s.Dv + (r - s.Dk)];
            max_err = std::max(max_err, std::abs(want - have));
          }
        }
      }
    }
  EXPECT_LE(max_err, 1e-10);
}

// φ depends on t mod W only, reduced in double: a position of 2^40 gives the same result as
// its residue (integer W), and a multiple of a non-integer W the same as position 0.
TEST(BlaReference, LargePositionsReduce) {
  const int64_t big = int64_t(1) << 40;
  {
    const ref::BlaShape s{1, 30, 2, 4, 3, /*M=*/5, /*W=*/48.0, /*S=*/9};
    BlaCase far = make_case(s, big, 41, 0.9, true), near = far;
    near.p.pos0 = big % 48;
    const ref::BlaOutputs a = far.run(), b = near.run();
    EXPECT_LE(rel_err(a.o, b.o), 1e-12);
    EXPECT_LE(rel_err(a.state_k, b.state_k), 1e-12);
    EXPECT_LE(rel_err(a.state_v, b.state_v), 1e-12);
  }
  {
    const ref::BlaShape s{1, 30, 2, 4, 3, /*M=*/5, /*W=*/37.5, /*S=*/9};
    BlaCase far = make_case(s, 75 * (int64_t(1) << 34), 42, 0.9, true), near = far;  // 2^35 periods
    near.p.pos0 = 0;
    const ref::BlaOutputs a = far.run(), b = near.run();
    EXPECT_LE(rel_err(a.o, b.o), 1e-12);
    EXPECT_LE(rel_err(a.state_k, b.state_k), 1e-12);
    EXPECT_LE(rel_err(a.state_v, b.state_v), 1e-12);
  }
}

// T tokens in one call equal two calls, the second starting from the first's final state with
// pos0 advanced (SPEC.md §0).
TEST(BlaReference, StateChaining) {
  const ref::BlaShape s{2, 13, 3, 4, 5, /*M=*/3, /*W=*/10.5, /*S=*/8};
  const BlaCase c = make_case(s, /*pos0=*/7, 51, 0.7, true);
  const ref::BlaOutputs whole = c.run();
  const int64_t cut = 5;
  BlaCase first = c, second = c;
  first.s.T = cut;
  first.q = tokens(c.q, s, s.Dk, 0, cut);
  first.k = tokens(c.k, s, s.Dk, 0, cut);
  first.v = tokens(c.v, s, s.Dv, 0, cut);
  const ref::BlaOutputs o1 = first.run();
  second.s.T = s.T - cut;
  second.p.pos0 = c.p.pos0 + cut;
  second.q = tokens(c.q, s, s.Dk, cut, s.T);
  second.k = tokens(c.k, s, s.Dk, cut, s.T);
  second.v = tokens(c.v, s, s.Dv, cut, s.T);
  second.state_k = o1.state_k;
  second.state_v = o1.state_v;
  const ref::BlaOutputs o2 = second.run();
  // Reassemble [B,T,H,Dv] from the two pieces.
  std::vector<double> o;
  for (int64_t b = 0; b < s.B; ++b) {
    const int64_t n1 = cut * s.H * s.Dv, n2 = (s.T - cut) * s.H * s.Dv;
    o.insert(o.end(), o1.o.begin() + b * n1, o1.o.begin() + (b + 1) * n1);
    o.insert(o.end(), o2.o.begin() + b * n2, o2.o.begin() + (b + 1) * n2);
  }
  EXPECT_LE(rel_err(o, whole.o), 1e-13);
  EXPECT_LE(rel_err(o2.state_k, whole.state_k), 1e-13);
  EXPECT_LE(rel_err(o2.state_v, whole.state_v), 1e-13);
}

// The write weights against the closed form D_M(x) = sin((2M+1)πx/W) / sin(πx/W), and over
// one period of an integer W > 2M they sum to 1 (the 1/W normalisation).
TEST(BlaReference, DirichletWeight) {
  const int64_t M = 4, S = 7;
  for (double W : {37.5, 12.0}) {
    for (int64_t j = 0; j < S; ++j)
      for (int64_t t : {1, 2, 5, 11, 100, 1000003}) {
        // Reduce t first, as the spec asks: a_j − t in double would lose ~1e-11 at t ~ 1e6.
        const double x = j * W / S - std::fmod(double(t), W);
        if (std::abs(std::sin(M_PI * x / W)) < 1e-3) continue;  // near the removable singularity
        const double want = std::sin((2 * M + 1) * M_PI * x / W) / std::sin(M_PI * x / W) / W;
        EXPECT_NEAR(ref::dirichlet_weight(M, W, S, j, t), want, 1e-12) << "W=" << W << " j=" << j << " t=" << t;
      }
  }
  for (int64_t j = 0; j < S; ++j) {
    double sum = 0;
    for (int64_t t = 0; t < 12; ++t) sum += ref::dirichlet_weight(M, 12.0, S, j, t);
    EXPECT_NEAR(sum, 1.0, 1e-13);
  }
  EXPECT_NEAR(ref::dirichlet_weight(M, 9.0, 3, 1, 3), (2 * M + 1) / 9.0, 1e-14);  // the peak: a_1 = 3 = t
}

// M = 0: φ = 1/W everywhere, so all slots are equal, the softmax is uniform and
// o_t = Σ_τ γ^{t−τ} v_τ / W (zero initial state).
TEST(BlaReference, NoModes) {
  const ref::BlaShape s{1, 9, 2, 3, 4, /*M=*/0, /*W=*/9.25, /*S=*/5};
  const BlaCase c = make_case(s, /*pos0=*/3, 61, 0.8, false);
  for (int64_t j = 0; j < s.S; ++j)
    for (int64_t t : {0, 3, 17, 1 << 30}) EXPECT_EQ(ref::dirichlet_weight(0, s.W, s.S, j, t), 1 / s.W);
  const ref::BlaOutputs got = c.run();
  std::vector<double> want(got.o.size());
  for (int64_t h = 0; h < s.H; ++h) {
    const double gamma = std::exp(c.p.log_gamma[h]);
    std::vector<double> acc(s.Dv, 0.0);
    for (int64_t i = 0; i < s.T; ++i)
      for (int64_t col = 0; col < s.Dv; ++col) {
        acc[col] = gamma * acc[col] + c.v[(i * s.H + h) * s.Dv + col] / s.W;
        want[(i * s.H + h) * s.Dv + col] = acc[col];
      }
  }
  EXPECT_LE(rel_err(got.o, want), 1e-12);
}

// S = 1: the softmax over one slot is 1, so o_t = Vs_t[0] = γ^{i+1} Vs_in + Σ_τ γ^{t−τ} φ_τ[0] v_τ,
// with φ from the closed form of the Dirichlet kernel (positions avoid its removable singularity).
TEST(BlaReference, OneSlot) {
  const ref::BlaShape s{2, 10, 2, 3, 4, /*M=*/2, /*W=*/6.5, /*S=*/1};
  const BlaCase c = make_case(s, /*pos0=*/1, 71, 0.8, true);  // t = 1..10, no multiple of 6.5
  const ref::BlaOutputs got = c.run();
  std::vector<double> want(got.o.size());
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      const double gamma = std::exp(c.p.log_gamma[h]);
      std::vector<double> acc(&c.state_v[(b * s.H + h) * s.Dv], &c.state_v[(b * s.H + h) * s.Dv] + s.Dv);
      for (int64_t i = 0; i < s.T; ++i) {
        const double x = -double(c.p.pos0 + i);  // a_0 − t
        const double phi = std::sin((2 * s.M + 1) * M_PI * x / s.W) / std::sin(M_PI * x / s.W) / s.W;
        for (int64_t col = 0; col < s.Dv; ++col) {
          acc[col] = gamma * acc[col] + phi * c.v[((b * s.T + i) * s.H + h) * s.Dv + col];
          want[((b * s.T + i) * s.H + h) * s.Dv + col] = acc[col];
        }
      }
    }
  EXPECT_LE(rel_err(got.o, want), 1e-12);
}
