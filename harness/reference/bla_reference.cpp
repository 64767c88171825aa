#include "bla_reference.h"

#include <algorithm>
#include <cmath>
#include <complex>

namespace fsattn::ref {

double dirichlet(int64_t M, double W, double x) {
  double d = 1.0;
  for (int64_t m = 1; m <= M; ++m) d += 2.0 * std::cos(2.0 * M_PI * double(m) * x / W);
  return d;
}

double dirichlet_weight(int64_t M, double W, int64_t S, int64_t j, int64_t t) {
  // Reduce the position first: double(t) is exact up to 2^53 and fmod is exact, so the phase
  // keeps full precision however large t is (cos of 2πm·t/W with a huge t would not).
  const double r = std::fmod(double(t), W);
  return dirichlet(M, W, double(j) * W / double(S) - r) / W;  // a_j − (t mod W)
}

std::vector<double> bla_interpolate(int64_t B, int64_t H, int64_t D, int64_t M, double W, int64_t S, int64_t position,
                                    const std::vector<double> &lags, const std::vector<double> &state) {
  const int64_t N = int64_t(lags.size());
  const double phase = std::fmod(double(position), W);
  std::vector<double> out(B * H * N * D, 0.0);
  for (int64_t bh = 0; bh < B * H; ++bh)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < S; ++j) {
        const double w = dirichlet(M, W, double(j) * W / double(S) - (phase - lags[n])) / double(S);
        for (int64_t r = 0; r < D; ++r) out[(bh * N + n) * D + r] += w * state[(bh * S + j) * D + r];
      }
  return out;
}

std::vector<double> exact_window_attention(const BlaShape &s, double scale, const std::vector<double> &q,
                                           const std::vector<double> &k, const std::vector<double> &v) {
  std::vector<double> o(s.B * s.T * s.H * s.Dv);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h)
      for (int64_t i = 0; i < s.T; ++i) {
        const double *qi = &q[((b * s.T + i) * s.H + h) * s.Dk];
        std::vector<double> e(i + 1);
        double den = double(s.S - i - 1);  // the empty slots: exp(0) each
        for (int64_t tau = 0; tau <= i; ++tau) {
          double dot = 0;
          for (int64_t r = 0; r < s.Dk; ++r) dot += qi[r] * k[((b * s.T + tau) * s.H + h) * s.Dk + r];
          den += (e[tau] = std::exp(scale * dot));
        }
        for (int64_t col = 0; col < s.Dv; ++col) {
          double acc = 0;
          for (int64_t tau = 0; tau <= i; ++tau) acc += e[tau] * v[((b * s.T + tau) * s.H + h) * s.Dv + col];
          o[((b * s.T + i) * s.H + h) * s.Dv + col] = acc / den;
        }
      }
  return o;
}

std::vector<double> fourier_slot_state(const BlaShape &s, int64_t D, const std::vector<double> &log_gamma, int64_t pos0,
                                       const std::vector<double> &x) {
  using cd = std::complex<double>;
  const int64_t M = s.M;
  std::vector<double> out(s.B * s.H * s.S * D);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      const double gamma = std::exp(log_gamma[h]);
      std::vector<cd> F((2 * M + 1) * D, 0.0);  // F[m + M][r]
      for (int64_t i = 0; i < s.T; ++i) {
        const double t = std::fmod(double(pos0 + i), s.W);
        for (int64_t m = -M; m <= M; ++m) {
          const cd rot = std::polar(1.0, -2 * M_PI * double(m) / s.W * t);
          for (int64_t r = 0; r < D; ++r)
            F[(m + M) * D + r] = gamma * F[(m + M) * D + r] + rot * x[((b * s.T + i) * s.H + h) * D + r];
        }
      }
      for (int64_t j = 0; j < s.S; ++j) {
        const double a = double(j) * s.W / double(s.S);
        for (int64_t r = 0; r < D; ++r) {
          cd acc = 0;
          for (int64_t m = -M; m <= M; ++m) acc += std::polar(1.0, 2 * M_PI * double(m) / s.W * a) * F[(m + M) * D + r];
          out[((b * s.H + h) * s.S + j) * D + r] = acc.real() / s.W;
        }
      }
    }
  return out;
}

namespace {

// The initial state of one (batch, head): n values from `offset`, or zeros when none is given.
std::vector<double> head_state(const std::vector<double> &in, size_t offset, int64_t n) {
  if (in.empty()) return std::vector<double>(n, 0.0);
  return std::vector<double>(in.begin() + offset, in.begin() + offset + n);
}

// One token at position t of one (batch, head), docs/spec.md §2: the write weights φ_t, then
// Ks_t[j] = γ Ks_{t-1}[j] + φ_t[j] k_t (same for Vs), then π_t = softmax_j(scale Ks_t[j] · q_t)
// with the max subtracted so exp cannot overflow.
void bla_token(const BlaShape &s, const BlaParams &p, double gamma, int64_t t, const double *q, const double *k,
               const double *v, std::vector<double> &Ks, std::vector<double> &Vs, std::vector<double> &phi,
               std::vector<double> &pi) {
  const int64_t S = s.S, Dk = s.Dk, Dv = s.Dv;
  for (int64_t j = 0; j < S; ++j) phi[j] = dirichlet_weight(s.M, s.W, S, j, t);
  for (int64_t j = 0; j < S; ++j) {
    for (int64_t r = 0; r < Dk; ++r) Ks[j * Dk + r] = gamma * Ks[j * Dk + r] + phi[j] * k[r];
    for (int64_t c = 0; c < Dv; ++c) Vs[j * Dv + c] = gamma * Vs[j * Dv + c] + phi[j] * v[c];
  }
  double zmax = -INFINITY;
  for (int64_t j = 0; j < S; ++j) {
    double dot = 0;
    for (int64_t r = 0; r < Dk; ++r) dot += Ks[j * Dk + r] * q[r];
    pi[j] = p.scale * dot;
    zmax = std::max(zmax, pi[j]);
  }
  double den = 0;
  for (int64_t j = 0; j < S; ++j) den += (pi[j] = std::exp(pi[j] - zmax));
  for (int64_t j = 0; j < S; ++j) pi[j] /= den;
}

}  // namespace

BlaOutputs bla_forward(const BlaShape &s, const BlaParams &p, const std::vector<double> &q,
                       const std::vector<double> &k, const std::vector<double> &v,
                       const std::vector<double> &state_k_in, const std::vector<double> &state_v_in) {
  const int64_t B = s.B, T = s.T, H = s.H, Dk = s.Dk, Dv = s.Dv, S = s.S;
  BlaOutputs out;
  out.o.assign(B * T * H * Dv, 0.0);
  out.state_k.assign(B * H * S * Dk, 0.0);
  out.state_v.assign(B * H * S * Dv, 0.0);
  std::vector<double> phi(S), pi(S);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const double gamma = std::exp(p.log_gamma[h]);
      const size_t sk = (b * H + h) * S * Dk, sv = (b * H + h) * S * Dv;
      std::vector<double> Ks = head_state(state_k_in, sk, S * Dk), Vs = head_state(state_v_in, sv, S * Dv);
      for (int64_t i = 0; i < T; ++i) {
        const size_t ak = ((b * T + i) * H + h) * Dk, av = ((b * T + i) * H + h) * Dv;
        bla_token(s, p, gamma, p.pos0 + i, &q[ak], &k[ak], &v[av], Ks, Vs, phi, pi);
        // o_t = Σ_j π_t[j] Vs_t[j]
        for (int64_t c = 0; c < Dv; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < S; ++j) acc += pi[j] * Vs[j * Dv + c];
          out.o[av + c] = acc;
        }
      }
      std::copy(Ks.begin(), Ks.end(), &out.state_k[sk]);
      std::copy(Vs.begin(), Vs.end(), &out.state_v[sv]);
    }
  }
  return out;
}

BlaGrads bla_backward(const BlaShape &s, const BlaParams &p, const std::vector<double> &q, const std::vector<double> &k,
                      const std::vector<double> &v, const std::vector<double> &state_k_in,
                      const std::vector<double> &state_v_in, const std::vector<double> &d_o,
                      const std::vector<double> &d_state_k, const std::vector<double> &d_state_v) {
  const int64_t B = s.B, T = s.T, H = s.H, Dk = s.Dk, Dv = s.Dv, S = s.S;
  BlaGrads g;
  g.q.assign(q.size(), 0.0);
  g.k.assign(k.size(), 0.0);
  g.v.assign(v.size(), 0.0);
  g.log_gamma.assign(H, 0.0);
  g.state_k.assign(B * H * S * Dk, 0.0);
  g.state_v.assign(B * H * S * Dv, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const double gamma = std::exp(p.log_gamma[h]);
      const size_t sk = (b * H + h) * S * Dk, sv = (b * H + h) * S * Dv;
      // Forward again, keeping every state: Ks[t] is the state before token t, Ks[T] the final.
      std::vector<std::vector<double>> Ks(T + 1), Vs(T + 1), phi(T, std::vector<double>(S)),
          pi(T, std::vector<double>(S));
      Ks[0] = head_state(state_k_in, sk, S * Dk);
      Vs[0] = head_state(state_v_in, sv, S * Dv);
      for (int64_t i = 0; i < T; ++i) {
        const size_t ak = ((b * T + i) * H + h) * Dk, av = ((b * T + i) * H + h) * Dv;
        Ks[i + 1] = Ks[i];
        Vs[i + 1] = Vs[i];
        bla_token(s, p, gamma, p.pos0 + i, &q[ak], &k[ak], &v[av], Ks[i + 1], Vs[i + 1], phi[i], pi[i]);
      }
      // Backward: GK, GV are dL/dKs, dL/dVs of the state after token i, all paths included.
      std::vector<double> GK(S * Dk, 0.0), GV(S * Dv, 0.0), dpi(S), dz(S);
      if (!d_state_k.empty()) std::copy(&d_state_k[sk], &d_state_k[sk] + S * Dk, GK.begin());
      if (!d_state_v.empty()) std::copy(&d_state_v[sv], &d_state_v[sv] + S * Dv, GV.begin());
      double d_gamma = 0;
      for (int64_t i = T - 1; i >= 0; --i) {
        const size_t ak = ((b * T + i) * H + h) * Dk, av = ((b * T + i) * H + h) * Dv;
        const std::vector<double> &Kt = Ks[i + 1], &Vt = Vs[i + 1];
        // o = Vs^T π: dπ = Vs do, dVs += π do^T
        double pdp = 0;
        for (int64_t j = 0; j < S; ++j) {
          dpi[j] = 0;
          for (int64_t c = 0; c < Dv; ++c) {
            dpi[j] += Vt[j * Dv + c] * d_o[av + c];
            GV[j * Dv + c] += pi[i][j] * d_o[av + c];
          }
          pdp += pi[i][j] * dpi[j];
        }
        // π = softmax(z): dz = π (dπ − π·dπ); z = scale Ks q: dq = scale Ks^T dz, dKs += scale dz q^T
        for (int64_t j = 0; j < S; ++j) dz[j] = pi[i][j] * (dpi[j] - pdp);
        for (int64_t j = 0; j < S; ++j)
          for (int64_t r = 0; r < Dk; ++r) {
            g.q[ak + r] += p.scale * Kt[j * Dk + r] * dz[j];
            GK[j * Dk + r] += p.scale * dz[j] * q[ak + r];
          }
        // Ks_after = γ Ks_before + φ k^T: dk = GK^T φ, dγ += <GK, Ks_before>, GK <- γ GK
        for (int64_t j = 0; j < S; ++j) {
          for (int64_t r = 0; r < Dk; ++r) {
            g.k[ak + r] += GK[j * Dk + r] * phi[i][j];
            d_gamma += GK[j * Dk + r] * Ks[i][j * Dk + r];
            GK[j * Dk + r] *= gamma;
          }
          for (int64_t c = 0; c < Dv; ++c) {
            g.v[av + c] += GV[j * Dv + c] * phi[i][j];
            d_gamma += GV[j * Dv + c] * Vs[i][j * Dv + c];
            GV[j * Dv + c] *= gamma;
          }
        }
      }
      g.log_gamma[h] += gamma * d_gamma;  // dγ/dlog γ = γ
      std::copy(GK.begin(), GK.end(), &g.state_k[sk]);
      std::copy(GV.begin(), GV.end(), &g.state_v[sv]);
    }
  return g;
}

}  // namespace fsattn::ref
