#include "bla_reference.h"

#include <algorithm>
#include <cmath>

namespace fsattn::ref {

double dirichlet_weight(int64_t M, double W, int64_t S, int64_t j, int64_t t) {
  // Reduce the position first: double(t) is exact up to 2^53 and fmod is exact, so the phase
  // keeps full precision however large t is (cos of 2πm·t/W with a huge t would not).
  const double r = std::fmod(double(t), W);
  const double x = double(j) * W / double(S) - r;  // a_j − (t mod W)
  double d = 1.0;                                   // D_M(x) = 1 + 2 Σ_{m=1..M} cos(2π m x / W)
  for (int64_t m = 1; m <= M; ++m) d += 2.0 * std::cos(2.0 * M_PI * double(m) * x / W);
  return d / W;
}

BlaOutputs bla_forward(const BlaShape &s, const BlaParams &p, const std::vector<double> &q,
                       const std::vector<double> &k, const std::vector<double> &v,
                       const std::vector<double> &state_k_in, const std::vector<double> &state_v_in) {
  const int64_t B = s.B, T = s.T, H = s.H, Dk = s.Dk, Dv = s.Dv, S = s.S;
  BlaOutputs out;
  out.o.assign(B * T * H * Dv, 0.0);
  out.state_k.assign(B * H * S * Dk, 0.0);
  out.state_v.assign(B * H * S * Dv, 0.0);
  std::vector<double> phi(S), z(S);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const double gamma = std::exp(p.log_gamma[h]);
      // Ks [S][Dk], Vs [S][Dv]
      const size_t sk = (b * H + h) * S * Dk, sv = (b * H + h) * S * Dv;
      std::vector<double> Ks(S * Dk, 0.0), Vs(S * Dv, 0.0);
      if (!state_k_in.empty()) std::copy(&state_k_in[sk], &state_k_in[sk] + S * Dk, Ks.begin());
      if (!state_v_in.empty()) std::copy(&state_v_in[sv], &state_v_in[sv] + S * Dv, Vs.begin());

      for (int64_t i = 0; i < T; ++i) {
        const int64_t t = p.pos0 + i;
        const size_t ak = ((b * T + i) * H + h) * Dk, av = ((b * T + i) * H + h) * Dv;
        for (int64_t j = 0; j < S; ++j) phi[j] = dirichlet_weight(s.M, s.W, S, j, t);
        // Ks_t[j] = γ Ks_{t-1}[j] + φ_t[j] k_t, same for Vs
        for (int64_t j = 0; j < S; ++j) {
          for (int64_t r = 0; r < Dk; ++r) Ks[j * Dk + r] = gamma * Ks[j * Dk + r] + phi[j] * k[ak + r];
          for (int64_t c = 0; c < Dv; ++c) Vs[j * Dv + c] = gamma * Vs[j * Dv + c] + phi[j] * v[av + c];
        }
        // z_t[j] = scale (Ks_t[j] · q_t); softmax with the max subtracted so exp cannot overflow
        double zmax = -INFINITY;
        for (int64_t j = 0; j < S; ++j) {
          double dot = 0;
          for (int64_t r = 0; r < Dk; ++r) dot += Ks[j * Dk + r] * q[ak + r];
          z[j] = p.scale * dot;
          zmax = std::max(zmax, z[j]);
        }
        double den = 0;
        for (int64_t j = 0; j < S; ++j) den += (z[j] = std::exp(z[j] - zmax));
        // o_t = Σ_j π_t[j] Vs_t[j]
        for (int64_t c = 0; c < Dv; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < S; ++j) acc += z[j] * Vs[j * Dv + c];
          out.o[av + c] = acc / den;
        }
      }
      std::copy(Ks.begin(), Ks.end(), &out.state_k[sk]);
      std::copy(Vs.begin(), Vs.end(), &out.state_v[sv]);
    }
  }
  return out;
}

}  // namespace fsattn::ref
