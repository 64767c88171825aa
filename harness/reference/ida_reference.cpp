#include "ida_reference.h"

#include <cmath>
#include <complex>

namespace fsattn::ref {

namespace {
using cd = std::complex<double>;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double silu(double x) { return x * sigmoid(x); }
double silu_grad(double x) { return sigmoid(x) * (1.0 + x * (1.0 - sigmoid(x))); }

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
// The gradient of xi at x, given the gradient g of its output.
std::vector<double> xi_grad(const double *x, int64_t n, double eps, const std::vector<double> &g) {
  std::vector<double> u(n);
  double ss = 0;
  for (int64_t r = 0; r < n; ++r) {
    u[r] = silu(x[r]);
    ss += u[r] * u[r];
  }
  const double norm = std::sqrt(ss + eps);
  double gz = 0;  // Σ g z
  for (int64_t r = 0; r < n; ++r) gz += g[r] * u[r] / norm;
  std::vector<double> gx(n);
  for (int64_t r = 0; r < n; ++r) gx[r] = (g[r] - u[r] / norm * gz) / norm * silu_grad(x[r]);
  return gx;
}

// rms(x) = x / sqrt(mean x^2 + eps)
std::vector<double> rms(const std::vector<double> &x, double eps) {
  double ms = 0;
  for (double e : x) ms += e * e;
  ms /= double(x.size());
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size(); ++r) y[r] = x[r] / std::sqrt(ms + eps);
  return y;
}
std::vector<double> rms_grad(const std::vector<double> &x, double eps, const std::vector<double> &g) {
  const std::vector<double> y = rms(x, eps);
  double ms = 0, gy = 0;
  for (size_t r = 0; r < x.size(); ++r) {
    ms += x[r] * x[r];
    gy += g[r] * y[r];
  }
  const double s = std::sqrt(ms / double(x.size()) + eps), n = double(x.size());
  std::vector<double> gx(x.size());
  for (size_t r = 0; r < x.size(); ++r) gx[r] = (g[r] - y[r] * gy / n) / s;
  return gx;
}
std::vector<double> affine(const std::vector<double> &y, const double *g, const double *b) {
  std::vector<double> z(y.size());
  for (size_t r = 0; r < y.size(); ++r) z[r] = y[r] * g[r] + b[r];
  return z;
}

// The per-head constants: modes Λ = exp(Δ A), input vector B, G = C^T C.
struct Head {
  int64_t M;
  double dt;
  std::vector<cd> dtA, lambda, Bm, G;
  Head(const IdaParams &p, int64_t h, int64_t M_)
      : M(M_), dt(std::exp(p.log_dt[h])), dtA(M), lambda(M), Bm(M), G(M * M) {
    for (int64_t m = 0; m < M; ++m) {
      dtA[m] = dt * cd(-std::exp(p.A_re_log[h * M + m]), p.A_im[h * M + m]);
      lambda[m] = std::exp(dtA[m]);
      Bm[m] = cd(p.B[(h * M + m) * 2], p.B[(h * M + m) * 2 + 1]);
    }
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < M; ++j) {
        cd g = 0;
        for (int64_t r = 0; r < M; ++r) g += C(p, h, r, m) * C(p, h, r, j);
        G[m * M + j] = g;
      }
  }
  cd C(const IdaParams &p, int64_t h, int64_t row, int64_t col) const {
    const double *c = &p.C[((h * M + row) * M + col) * 2];
    return cd(c[0], c[1]);
  }
};

// One token's feature maps (docs/spec.md §1).
struct Features {
  std::vector<double> fq, kn, kt, vn, vt;  // kn = rms(xi(k)), vn = rms(v): before the affine
  Features(const IdaParams &p, int64_t h, int64_t Dk, int64_t Dv, const double *q, const double *k, const double *v)
      : fq(xi(q, Dk, p.eps)), kn(rms(xi(k, Dk, p.eps), p.eps)), kt(affine(kn, &p.gk[h * Dk], &p.bk[h * Dk])),
        vn(rms(std::vector<double>(v, v + Dv), p.eps)), vt(affine(vn, &p.gv[h * Dv], &p.bv[h * Dv])) {}
};

// A state [M][D] complex, read from or written to the API's [M,D,2] layout.
std::vector<cd> load_state(const std::vector<double> &x, size_t at, int64_t n) {
  std::vector<cd> s(n);
  if (!x.empty())
    for (int64_t e = 0; e < n; ++e) s[e] = cd(x[at + 2 * e], x[at + 2 * e + 1]);
  return s;
}
void store_state(const std::vector<cd> &s, std::vector<double> &x, size_t at) {
  for (size_t e = 0; e < s.size(); ++e) {
    x[at + 2 * e] = s[e].real();
    x[at + 2 * e + 1] = s[e].imag();
  }
}

// One token of the recurrence and readout: X = Λ X + B x for both states, then p = Xk fq,
// w = G p, o = Re(Xv^T w).
void token_step(const Head &hd, const Features &f, int64_t Dk, int64_t Dv, std::vector<cd> &Xk, std::vector<cd> &Xv,
                std::vector<cd> &pm, std::vector<cd> &w, double *o) {
  const int64_t M = hd.M;
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t r = 0; r < Dk; ++r) Xk[m * Dk + r] = hd.lambda[m] * Xk[m * Dk + r] + hd.Bm[m] * f.kt[r];
    for (int64_t c = 0; c < Dv; ++c) Xv[m * Dv + c] = hd.lambda[m] * Xv[m * Dv + c] + hd.Bm[m] * f.vt[c];
  }
  pm.assign(M, 0.0);
  w.assign(M, 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t r = 0; r < Dk; ++r) pm[m] += Xk[m * Dk + r] * f.fq[r];
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < M; ++j) w[m] += hd.G[m * M + j] * pm[j];
  for (int64_t c = 0; c < Dv; ++c) {
    cd acc = 0;
    for (int64_t m = 0; m < M; ++m) acc += Xv[m * Dv + c] * w[m];
    o[c] = acc.real();
  }
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
      const Head hd(p, h, M);
      const size_t sk = ((b * H + h) * M) * Dk * 2, sv = ((b * H + h) * M) * Dv * 2;
      std::vector<cd> Xk = load_state(state_k_in, sk, M * Dk), Xv = load_state(state_v_in, sv, M * Dv), pm, w;
      for (int64_t t = 0; t < T; ++t) {
        const size_t ak = ((b * T + t) * H + h) * Dk, av = ((b * T + t) * H + h) * Dv;
        token_step(hd, Features(p, h, Dk, Dv, &q[ak], &k[ak], &v[av]), Dk, Dv, Xk, Xv, pm, w, &out.o[av]);
      }
      store_state(Xk, out.state_k, sk);
      store_state(Xv, out.state_v, sv);
    }
  }
  return out;
}

// Conventions: a complex quantity z's gradient is g = ∂L/∂Re z + i ∂L/∂Im z, so that
// δL = Re Σ conj(g) δz; through z = a y (a complex), g_y = conj(a) g_z.
IdaGrads ida_backward(const IdaShape &s, const IdaParams &p, const std::vector<double> &q, const std::vector<double> &k,
                      const std::vector<double> &v, const std::vector<double> &state_k_in,
                      const std::vector<double> &state_v_in, const std::vector<double> &d_o,
                      const std::vector<double> &d_state_k, const std::vector<double> &d_state_v) {
  const int64_t B = s.B, T = s.T, H = s.H, Dk = s.Dk, Dv = s.Dv, M = s.M;
  IdaGrads g;
  g.q.assign(q.size(), 0.0);
  g.k.assign(k.size(), 0.0);
  g.v.assign(v.size(), 0.0);
  g.gk.assign(H * Dk, 0.0);
  g.bk.assign(H * Dk, 0.0);
  g.gv.assign(H * Dv, 0.0);
  g.bv.assign(H * Dv, 0.0);
  g.log_dt.assign(H, 0.0);
  g.A_re_log.assign(H * M, 0.0);
  g.A_im.assign(H * M, 0.0);
  g.B.assign(H * M * 2, 0.0);
  g.C.assign(H * M * M * 2, 0.0);
  g.state_k.assign(B * H * M * Dk * 2, 0.0);
  g.state_v.assign(B * H * M * Dv * 2, 0.0);
  for (int64_t h = 0; h < H; ++h) {
    const Head hd(p, h, M);
    std::vector<cd> gLambda(M), gBm(M), gG(M * M);
    for (int64_t b = 0; b < B; ++b) {
      const size_t sk = ((b * H + h) * M) * Dk * 2, sv = ((b * H + h) * M) * Dv * 2;
      // The forward, keeping every token's features, states, p and w.
      std::vector<Features> feat;
      std::vector<std::vector<cd>> Xk{load_state(state_k_in, sk, M * Dk)}, Xv{load_state(state_v_in, sv, M * Dv)};
      std::vector<std::vector<cd>> P(T), W(T);
      std::vector<double> o(Dv);
      for (int64_t t = 0; t < T; ++t) {
        const size_t ak = ((b * T + t) * H + h) * Dk, av = ((b * T + t) * H + h) * Dv;
        feat.emplace_back(p, h, Dk, Dv, &q[ak], &k[ak], &v[av]);
        Xk.push_back(Xk.back());
        Xv.push_back(Xv.back());
        token_step(hd, feat.back(), Dk, Dv, Xk.back(), Xv.back(), P[t], W[t], o.data());
      }
      // Backward: Ak, Av are ∂L/∂Xk_t, ∂L/∂Xv_t, starting from the final states' gradients.
      std::vector<cd> Ak = load_state(d_state_k, sk, M * Dk), Av = load_state(d_state_v, sv, M * Dv);
      for (int64_t t = T - 1; t >= 0; --t) {
        const size_t ak = ((b * T + t) * H + h) * Dk, av = ((b * T + t) * H + h) * Dv;
        const Features &f = feat[t];
        const std::vector<cd> &xk = Xk[t + 1], &xv = Xv[t + 1];
        // o = Re(Xv^T w): g_w = Σ_c d_o conj(Xv), and Xv gets d_o conj(w).
        std::vector<cd> gw(M), gp(M);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t c = 0; c < Dv; ++c) {
            gw[m] += d_o[av + c] * std::conj(xv[m * Dv + c]);
            Av[m * Dv + c] += d_o[av + c] * std::conj(W[t][m]);
          }
        // w = G p: g_p = conj(G)^T g_w, g_G += g_w conj(p)^T.
        for (int64_t m = 0; m < M; ++m)
          for (int64_t j = 0; j < M; ++j) {
            gp[j] += gw[m] * std::conj(hd.G[m * M + j]);
            gG[m * M + j] += gw[m] * std::conj(P[t][j]);
          }
        // p = Xk fq: Xk gets g_p fq; g_fq = Re Σ_m conj(g_p) Xk.
        std::vector<double> gfq(Dk), gkt(Dk), gvt(Dv);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t r = 0; r < Dk; ++r) {
            Ak[m * Dk + r] += gp[m] * f.fq[r];
            gfq[r] += (std::conj(gp[m]) * xk[m * Dk + r]).real();
          }
        // X_t = Λ X_{t-1} + B x_t, with Ak, Av now complete for token t.
        for (int64_t m = 0; m < M; ++m) {
          for (int64_t r = 0; r < Dk; ++r) {
            gkt[r] += (std::conj(Ak[m * Dk + r]) * hd.Bm[m]).real();
            gBm[m] += Ak[m * Dk + r] * f.kt[r];
            gLambda[m] += Ak[m * Dk + r] * std::conj(Xk[t][m * Dk + r]);
            Ak[m * Dk + r] *= std::conj(hd.lambda[m]);
          }
          for (int64_t c = 0; c < Dv; ++c) {
            gvt[c] += (std::conj(Av[m * Dv + c]) * hd.Bm[m]).real();
            gBm[m] += Av[m * Dv + c] * f.vt[c];
            gLambda[m] += Av[m * Dv + c] * std::conj(Xv[t][m * Dv + c]);
            Av[m * Dv + c] *= std::conj(hd.lambda[m]);
          }
        }
        // The feature maps.
        const std::vector<double> gxq = xi_grad(&q[ak], Dk, p.eps, gfq);
        std::vector<double> gkn(Dk), gvn(Dv);
        for (int64_t r = 0; r < Dk; ++r) {
          g.gk[h * Dk + r] += gkt[r] * f.kn[r];
          g.bk[h * Dk + r] += gkt[r];
          gkn[r] = gkt[r] * p.gk[h * Dk + r];
        }
        for (int64_t c = 0; c < Dv; ++c) {
          g.gv[h * Dv + c] += gvt[c] * f.vn[c];
          g.bv[h * Dv + c] += gvt[c];
          gvn[c] = gvt[c] * p.gv[h * Dv + c];
        }
        const std::vector<double> gxk = xi_grad(&k[ak], Dk, p.eps, rms_grad(xi(&k[ak], Dk, p.eps), p.eps, gkn));
        const std::vector<double> gxv = rms_grad(std::vector<double>(&v[av], &v[av] + Dv), p.eps, gvn);
        for (int64_t r = 0; r < Dk; ++r) {
          g.q[ak + r] = gxq[r];
          g.k[ak + r] = gxk[r];
        }
        for (int64_t c = 0; c < Dv; ++c) g.v[av + c] = gxv[c];
      }
      store_state(Ak, g.state_k, sk);  // ∂L/∂X_0 = conj(Λ) A_1, applied in the last step
      store_state(Av, g.state_v, sv);
    }
    // Λ = exp(Δ A), Δ A = Δ(−exp(A_re_log) + i A_im): g_{ΔA} = conj(Λ) g_Λ.
    for (int64_t m = 0; m < M; ++m) {
      const cd gdtA = std::conj(hd.lambda[m]) * gLambda[m];
      g.A_re_log[h * M + m] = -hd.dt * std::exp(p.A_re_log[h * M + m]) * gdtA.real();
      g.A_im[h * M + m] = hd.dt * gdtA.imag();
      g.log_dt[h] += (std::conj(gdtA) * hd.dtA[m]).real();
      g.B[(h * M + m) * 2] = gBm[m].real();
      g.B[(h * M + m) * 2 + 1] = gBm[m].imag();
    }
    // G = C^T C: g_C[r, a] = Σ_j (g_G[a, j] + g_G[j, a]) conj(C[r, j]).
    for (int64_t r = 0; r < M; ++r)
      for (int64_t a = 0; a < M; ++a) {
        cd gc = 0;
        for (int64_t j = 0; j < M; ++j) gc += (gG[a * M + j] + gG[j * M + a]) * std::conj(hd.C(p, h, r, j));
        g.C[((h * M + r) * M + a) * 2] = gc.real();
        g.C[((h * M + r) * M + a) * 2 + 1] = gc.imag();
      }
  }
  return g;
}

}  // namespace fsattn::ref
