#include "ida_reference.h"

#include <cmath>
#include <complex>

namespace fsattn::ref {

namespace {
using cd = std::complex<double>;

double silu(double x) { return x / (1.0 + std::exp(-x)); }

// xi(x) = silu(x) / sqrt(Σ silu(x)^2 + eps)
std::vector<double> xi(const double *x, int64_t n, double eps) {
  std::vector<double> y(n);
  double ss = 0;
  for (int64_t r = 0; r < n; ++r) {
    y[r] = silu(x[r]);
    ss += y[r] * y[r];
  }
  for (double &e : y) e /= std::sqrt(ss + eps);
  return y;
}

// rms(x) g + b
std::vector<double> rms_affine(const std::vector<double> &x, const double *g, const double *b, double eps) {
  double ms = 0;
  for (double e : x) ms += e * e;
  ms /= double(x.size());
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size(); ++r) y[r] = x[r] / std::sqrt(ms + eps) * g[r] + b[r];
  return y;
}
}  // namespace

IdaOutputs ida_forward(const IdaShape &s, const IdaParams &p, const std::vector<double> &q,
                       const std::vector<double> &k, const std::vector<double> &v,
                       const std::vector<double> &state_k_in, const std::vector<double> &state_v_in) {
  const int64_t B = s.B, T = s.T, H = s.H, Dk = s.Dk, Dv = s.Dv, M = s.M;
  IdaOutputs out;
  out.o.assign(B * T * H * Dv, 0.0);
  out.state_k.assign(B * H * M * Dk * 2, 0.0);
  out.state_v.assign(B * H * M * Dv * 2, 0.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const double dt = std::exp(p.log_dt[h]);
      std::vector<cd> lambda(M), Bm(M), G(M * M);
      for (int64_t m = 0; m < M; ++m) {
        cd A(-std::exp(p.A_re_log[h * M + m]), p.A_im[h * M + m]);
        lambda[m] = std::exp(dt * A);
        Bm[m] = cd(p.B[(h * M + m) * 2], p.B[(h * M + m) * 2 + 1]);
      }
      auto C = [&](int64_t row, int64_t col) {
        const double *c = &p.C[((h * M + row) * M + col) * 2];
        return cd(c[0], c[1]);
      };
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < M; ++j) {
          cd g = 0;
          for (int64_t r = 0; r < M; ++r) g += C(r, m) * C(r, j);
          G[m * M + j] = g;
        }
      // Xk [M][Dk], Xv [M][Dv]
      std::vector<cd> Xk(M * Dk), Xv(M * Dv);
      const size_t sk = ((b * H + h) * M) * Dk * 2, sv = ((b * H + h) * M) * Dv * 2;
      if (!state_k_in.empty())
        for (int64_t e = 0; e < M * Dk; ++e) Xk[e] = cd(state_k_in[sk + 2 * e], state_k_in[sk + 2 * e + 1]);
      if (!state_v_in.empty())
        for (int64_t e = 0; e < M * Dv; ++e) Xv[e] = cd(state_v_in[sv + 2 * e], state_v_in[sv + 2 * e + 1]);

      for (int64_t t = 0; t < T; ++t) {
        const size_t ak = ((b * T + t) * H + h) * Dk, av = ((b * T + t) * H + h) * Dv;
        std::vector<double> fq = xi(&q[ak], Dk, p.eps);
        std::vector<double> kt = rms_affine(xi(&k[ak], Dk, p.eps), &p.gk[h * Dk], &p.bk[h * Dk], p.eps);
        std::vector<double> vt = rms_affine(std::vector<double>(&v[av], &v[av] + Dv), &p.gv[h * Dv],
                                            &p.bv[h * Dv], p.eps);
        for (int64_t m = 0; m < M; ++m) {
          for (int64_t r = 0; r < Dk; ++r) Xk[m * Dk + r] = lambda[m] * Xk[m * Dk + r] + Bm[m] * kt[r];
          for (int64_t c = 0; c < Dv; ++c) Xv[m * Dv + c] = lambda[m] * Xv[m * Dv + c] + Bm[m] * vt[c];
        }
        // p = Xk fq, w = G p, o = Re(Xv^T w)
        std::vector<cd> pm(M, 0.0), w(M, 0.0);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t r = 0; r < Dk; ++r) pm[m] += Xk[m * Dk + r] * fq[r];
        for (int64_t m = 0; m < M; ++m)
          for (int64_t j = 0; j < M; ++j) w[m] += G[m * M + j] * pm[j];
        for (int64_t c = 0; c < Dv; ++c) {
          cd acc = 0;
          for (int64_t m = 0; m < M; ++m) acc += Xv[m * Dv + c] * w[m];
          out.o[av + c] = acc.real();
        }
      }
      for (int64_t e = 0; e < M * Dk; ++e) {
        out.state_k[sk + 2 * e] = Xk[e].real();
        out.state_k[sk + 2 * e + 1] = Xk[e].imag();
      }
      for (int64_t e = 0; e < M * Dv; ++e) {
        out.state_v[sv + 2 * e] = Xv[e].real();
        out.state_v[sv + 2 * e + 1] = Xv[e].imag();
      }
    }
  }
  return out;
}

}  // namespace fsattn::ref
