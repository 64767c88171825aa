// Checks of the float64 BLA reference itself (docs/spec.md §2), against forms of the spec it does
// not use: the exact window, the Fourier form, position reduction, chaining, degenerate sizes.
#include "reference/bla_reference.h"
#include "cases.h"

#include <gtest/gtest.h>

using namespace fsattn;
using namespace fsattn::test;

namespace {

// ||a - b||_F / ||b||_F
double rel_err(const std::vector<double> &a, const std::vector<double> &b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1.0));
}

ref::BlaOutputs run(const BlaCase &c) { return reference_bla_forward(c); }

}  // namespace

// W = S = 2M+1, γ = 1, T ≤ W: every slot holds one token, so BLA is causal softmax attention
// over the real tokens plus the empty slots (key 0, value 0, each adding exp(0) = 1 to the
// denominator). pos0 only rotates which slot a token lands in.
TEST(BlaReference, ExactWindowIsCausalSoftmax) {
  for (int64_t pos0 : {0, 4}) {
    const ref::BlaShape s{2, 7, 2, 5, 4, /*M=*/3, /*W=*/7.0, /*S=*/7};
    BlaCase c = make_bla_case(s, pos0, 21 + pos0, 1.0, false);
    c.log_gamma.set(std::vector<float>(s.H, 0.0f));
    ref::BlaOutputs got = run(c);
    EXPECT_LE(rel_err(got.o, ref::exact_window_attention(s, c.ref_params().scale, c.q.d, c.k.d, c.v.d)), 1e-10)
        << "pos0=" << pos0;
    // The final slots are the tokens themselves, token τ in slot (pos0 + τ) mod S.
    std::vector<double> want_k(got.state_k.size()), want_v(got.state_v.size());
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < s.H; ++h)
        for (int64_t tau = 0; tau < s.T; ++tau) {
          const int64_t j = (pos0 + tau) % s.S;
          for (int64_t r = 0; r < s.Dk; ++r)
            want_k[((b * s.H + h) * s.S + j) * s.Dk + r] = c.k.d[((b * s.T + tau) * s.H + h) * s.Dk + r];
          for (int64_t col = 0; col < s.Dv; ++col)
            want_v[((b * s.H + h) * s.S + j) * s.Dv + col] = c.v.d[((b * s.T + tau) * s.H + h) * s.Dv + col];
        }
    // Slot values are sums of cosines that cancel to ~1e-16, so compare absolutely.
    for (size_t e = 0; e < want_k.size(); ++e) ASSERT_NEAR(got.state_k[e], want_k[e], 1e-12);
    for (size_t e = 0; e < want_v.size(); ++e) ASSERT_NEAR(got.state_v[e], want_v[e], 1e-12);
  }
}

// The slots are the Dirichlet interpolation of the Fourier coefficients
// F_t[m] = γ F_{t−1}[m] + e^{−iω_m t} k_t: Ks_t[j] = (1/W) Re Σ_m e^{iω_m a_j} F_t[m].
// Non-integer W, S ≠ 2M+1, γ < 1, pos0 > 0; checked after every token (prefix runs).
TEST(BlaReference, MatchesFourierForm) {
  const ref::BlaShape s{2, 20, 2, 3, 2, /*M=*/4, /*W=*/37.5, /*S=*/6};
  const BlaCase c = make_bla_case(s, /*pos0=*/13, 31, 0.8, false);
  for (int64_t i = 1; i <= s.T; ++i) {
    const BlaCase prefix = c.tokens(0, i);
    const ref::BlaOutputs got = run(prefix);
    const auto want_k = ref::fourier_slot_state(prefix.s, s.Dk, c.log_gamma.d, c.pos0, prefix.k.d);
    const auto want_v = ref::fourier_slot_state(prefix.s, s.Dv, c.log_gamma.d, c.pos0, prefix.v.d);
    for (size_t e = 0; e < want_k.size(); ++e) ASSERT_NEAR(got.state_k[e], want_k[e], 1e-10) << "T=" << i;
    for (size_t e = 0; e < want_v.size(); ++e) ASSERT_NEAR(got.state_v[e], want_v[e], 1e-10) << "T=" << i;
  }
}

// φ depends on t mod W only, reduced in double: a position of 2^40 gives the same result as
// its residue (integer W), and a multiple of a non-integer W the same as position 0.
TEST(BlaReference, LargePositionsReduce) {
  const int64_t big = int64_t(1) << 40;
  {
    const ref::BlaShape s{1, 30, 2, 4, 3, /*M=*/5, /*W=*/48.0, /*S=*/9};
    BlaCase far = make_bla_case(s, big, 41, 0.9, true), near = far;
    near.pos0 = big % 48;
    const ref::BlaOutputs a = run(far), b = run(near);
    EXPECT_LE(rel_err(a.o, b.o), 1e-12);
    EXPECT_LE(rel_err(a.state_k, b.state_k), 1e-12);
    EXPECT_LE(rel_err(a.state_v, b.state_v), 1e-12);
  }
  {
    const ref::BlaShape s{1, 30, 2, 4, 3, /*M=*/5, /*W=*/37.5, /*S=*/9};
    BlaCase far = make_bla_case(s, 75 * (int64_t(1) << 34), 42, 0.9, true), near = far;  // 2^35 periods
    near.pos0 = 0;
    const ref::BlaOutputs a = run(far), b = run(near);
    EXPECT_LE(rel_err(a.o, b.o), 1e-12);
    EXPECT_LE(rel_err(a.state_k, b.state_k), 1e-12);
    EXPECT_LE(rel_err(a.state_v, b.state_v), 1e-12);
  }
}

// T tokens in one call equal two calls, the second starting from the first's final state with
// pos0 advanced (docs/spec.md §0).
TEST(BlaReference, StateChaining) {
  const ref::BlaShape s{2, 13, 3, 4, 5, /*M=*/3, /*W=*/10.5, /*S=*/8};
  const BlaCase c = make_bla_case(s, /*pos0=*/7, 51, 0.7, true);
  const ref::BlaOutputs whole = run(c);
  const int64_t cut = 5;
  const BlaCase first = c.tokens(0, cut), second = c.tokens(cut, s.T);
  const ref::BlaOutputs o1 = run(first);
  // The second piece starts from the first's float64 state (not rounded to float32).
  const ref::BlaOutputs o2 =
      ref::bla_forward(second.s, second.ref_params(), second.q.d, second.k.d, second.v.d, o1.state_k, o1.state_v);
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
  const BlaCase c = make_bla_case(s, /*pos0=*/3, 61, 0.8, false);
  for (int64_t j = 0; j < s.S; ++j)
    for (int64_t t : {0, 3, 17, 1 << 30}) EXPECT_EQ(ref::dirichlet_weight(0, s.W, s.S, j, t), 1 / s.W);
  const ref::BlaOutputs got = run(c);
  std::vector<double> want(got.o.size());
  for (int64_t h = 0; h < s.H; ++h) {
    const double gamma = std::exp(c.log_gamma.d[h]);
    std::vector<double> acc(s.Dv, 0.0);
    for (int64_t i = 0; i < s.T; ++i)
      for (int64_t col = 0; col < s.Dv; ++col) {
        acc[col] = gamma * acc[col] + c.v.d[(i * s.H + h) * s.Dv + col] / s.W;
        want[(i * s.H + h) * s.Dv + col] = acc[col];
      }
  }
  EXPECT_LE(rel_err(got.o, want), 1e-12);
}

// S = 1: the softmax over one slot is 1, so o_t = Vs_t[0] = γ^{i+1} Vs_in + Σ_τ γ^{t−τ} φ_τ[0] v_τ,
// with φ from the closed form of the Dirichlet kernel (positions avoid its removable singularity).
TEST(BlaReference, OneSlot) {
  const ref::BlaShape s{2, 10, 2, 3, 4, /*M=*/2, /*W=*/6.5, /*S=*/1};
  const BlaCase c = make_bla_case(s, /*pos0=*/1, 71, 0.8, true);  // t = 1..10, no multiple of 6.5
  const ref::BlaOutputs got = run(c);
  std::vector<double> want(got.o.size());
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      const double gamma = std::exp(c.log_gamma.d[h]);
      std::vector<double> acc(&c.state_v.d[(b * s.H + h) * s.Dv], &c.state_v.d[(b * s.H + h) * s.Dv] + s.Dv);
      for (int64_t i = 0; i < s.T; ++i) {
        const double x = -double(c.pos0 + i);  // a_0 − t
        const double phi = std::sin((2 * s.M + 1) * M_PI * x / s.W) / std::sin(M_PI * x / s.W) / s.W;
        for (int64_t col = 0; col < s.Dv; ++col) {
          acc[col] = gamma * acc[col] + phi * c.v.d[((b * s.T + i) * s.H + h) * s.Dv + col];
          want[((b * s.T + i) * s.H + h) * s.Dv + col] = acc[col];
        }
      }
    }
  EXPECT_LE(rel_err(got.o, want), 1e-12);
}

// Dirichlet interpolation of the slots (S >= 2M+1) is the blurred key history of docs/spec.md §2:
// at lag ℓ behind the newest token t, Σ_τ γ^{t−τ} D_M(t − ℓ − τ)/W k_τ, for fractional lags
// too; at a lag that lands on an anchor it returns that slot.
TEST(BlaReference, InterpolationIsTheBlurredHistory) {
  const ref::BlaShape s{2, 40, 2, 3, 2, /*M=*/4, /*W=*/23.5, /*S=*/11};
  const BlaCase c = make_bla_case(s, /*pos0=*/1000, 81, 0.9, false);
  const ref::BlaOutputs out = run(c);
  const int64_t t = c.pos0 + s.T - 1;
  std::vector<double> lags;
  for (double l = -3; l < 30; l += 0.75) lags.push_back(l);
  const std::vector<double> got = ref::bla_interpolate(s.B, s.H, s.Dk, s.M, s.W, s.S, t, lags, out.state_k);
  double max_err = 0, max_val = 0;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      const double gamma = std::exp(c.log_gamma.d[h]);
      for (size_t n = 0; n < lags.size(); ++n)
        for (int64_t r = 0; r < s.Dk; ++r) {
          double want = 0;
          for (int64_t i = 0; i < s.T; ++i) {
            const int64_t tau = c.pos0 + i;
            want += std::pow(gamma, double(t - tau)) * ref::dirichlet(s.M, s.W, double(t - tau) - lags[n]) / s.W *
                    c.k.d[((b * s.T + i) * s.H + h) * s.Dk + r];
          }
          const double have = got[((b * s.H + h) * lags.size() + n) * s.Dk + r];
          max_err = std::max(max_err, std::abs(have - want));
          max_val = std::max(max_val, std::abs(want));
        }
    }
  EXPECT_LE(max_err, 1e-10 * max_val);

  // Anchor a_j = j W / S sits at lag (t mod W) − a_j.
  const double phase = std::fmod(double(t), s.W);
  std::vector<double> anchors;
  for (int64_t j = 0; j < s.S; ++j) anchors.push_back(phase - double(j) * s.W / double(s.S));
  const std::vector<double> slots = ref::bla_interpolate(s.B, s.H, s.Dk, s.M, s.W, s.S, t, anchors, out.state_k);
  for (size_t e = 0; e < slots.size(); ++e) ASSERT_NEAR(slots[e], out.state_k[e], 1e-12);
}

// The reference's hand-derived gradients against central finite differences of
// L = <d_o, o> + <d_state_k, Ks_T> + <d_state_v, Vs_T>, for every input, with initial states,
// non-integer W, S ≠ 2M+1 and pos0 > 0 (docs/spec.md §4: within 1e-6).
TEST(BlaReference, GradientsMatchFiniteDifferences) {
  const ref::BlaShape s{2, 7, 2, 3, 2, /*M=*/2, /*W=*/5.5, /*S=*/4};
  const BlaCase c = make_bla_case(s, /*pos0=*/3, 91, 0.7, true);
  std::mt19937_64 rng(92);
  const std::vector<double> d_o = random_tensor(rng, s.B * s.T * s.H * s.Dv).d;
  const std::vector<double> d_sk = random_tensor(rng, s.B * s.H * s.S * s.Dk).d;
  const std::vector<double> d_sv = random_tensor(rng, s.B * s.H * s.S * s.Dv).d;
  struct Inputs {
    std::vector<double> q, k, v, log_gamma, state_k, state_v;
  };
  const Inputs x0{c.q.d, c.k.d, c.v.d, c.log_gamma.d, c.state_k.d, c.state_v.d};
  auto loss = [&](const Inputs &x) {
    ref::BlaParams p = c.ref_params();
    p.log_gamma = x.log_gamma;
    const ref::BlaOutputs out = ref::bla_forward(s, p, x.q, x.k, x.v, x.state_k, x.state_v);
    double l = 0;
    for (size_t i = 0; i < d_o.size(); ++i) l += d_o[i] * out.o[i];
    for (size_t i = 0; i < d_sk.size(); ++i) l += d_sk[i] * out.state_k[i];
    for (size_t i = 0; i < d_sv.size(); ++i) l += d_sv[i] * out.state_v[i];
    return l;
  };
  ref::BlaParams p = c.ref_params();
  const ref::BlaGrads g = ref::bla_backward(s, p, x0.q, x0.k, x0.v, x0.state_k, x0.state_v, d_o, d_sk, d_sv);
  const std::pair<std::vector<double> Inputs::*, const std::vector<double> *> checks[] = {
      {&Inputs::q, &g.q},
      {&Inputs::k, &g.k},
      {&Inputs::v, &g.v},
      {&Inputs::log_gamma, &g.log_gamma},
      {&Inputs::state_k, &g.state_k},
      {&Inputs::state_v, &g.state_v}};
  const char *names[] = {"q", "k", "v", "log_gamma", "state_k", "state_v"};
  for (size_t n = 0; n < std::size(checks); ++n) {
    const auto [member, analytic] = checks[n];
    std::vector<double> numeric((x0.*member).size());
    for (size_t i = 0; i < numeric.size(); ++i) {
      const double h = 1e-6;
      Inputs plus = x0, minus = x0;
      (plus.*member)[i] += h;
      (minus.*member)[i] -= h;
      numeric[i] = (loss(plus) - loss(minus)) / (2 * h);
    }
    EXPECT_LE(rel_err(*analytic, numeric), 1e-6) << names[n];
  }
}
