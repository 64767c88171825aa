// IDA's own stages (docs/spec.md §1): feature maps, the S4D modes, and the mode mixing w = G p.
#pragma once

#include "complex.h"
#include "grid.h"

namespace fsattn {

// Per token, chunked as (d, i, c, h, b); zero past the last token.
struct IdaFeatures {
  Halide::Func q, k, v;       // the inputs, chunked
  Halide::Func q_act, k_act;  // silu(q), silu(k): computed once for the norm and the feature
  Halide::Func q_ssq, k_ssq;  // Σ silu(x)^2 over d, for the l2 normalisation of xi
  Halide::Func v_ssq;         // Σ v^2 over r
  Halide::Func k_msq, v_msq;  // mean square, for the RMSNorm
  Halide::Func fq;            // xi(q)
  Halide::Func kt;            // rms(xi(k)) gk + bk
  Halide::Func vt;            // rms(v) gv + bv
  Halide::RDom rk, rv;        // reductions over Dk and Dv
};
IdaFeatures ida_features(const Halide::Func &q, const Halide::Func &k, const Halide::Func &v, const Halide::Func &gk,
                         const Halide::Func &bk, const Halide::Func &gv, const Halide::Func &bv,
                         const Halide::Expr &eps, const Halide::Expr &dk, const Halide::Expr &dv, const ChunkGrid &g);

// Λ_m = exp(Δ A_m): the table of powers and the write weight B_m.
struct IdaModes {
  CxFunc decay_pow;  // (n, m, h) = Λ_m^n = exp(n Δ A_m), 0 <= n <= L
  CxFunc write;      // (m, i, c, h, b) = B_m (independent of the token)
};
IdaModes ida_modes(const Halide::Func &log_dt, const Halide::Func &a_re_log, const Halide::Func &a_im,
                   const Halide::Func &b_mode);

// G = C^T C (complex symmetric, plain transpose) and w = G p per token.
struct IdaMixing {
  CxFunc gram64;  // (m, m2, h) = Σ_k C[k, m] C[k, m2], accumulated in double
  CxFunc gram;    // (m, m2, h) = gram64 rounded to float
  CxFunc w;       // (m, i, c, h, b) = Σ_m2 G[m, m2] p[m2]
  Halide::RDom r_gram, r_w;
};
IdaMixing ida_mixing(const Halide::Func &c_mix, const CxFunc &p, const Halide::Expr &modes);

// out(m, i, c, h, b) = Σ_m2 gram[m, m2] p[m2]; `r` receives the reduction over m2.
CxFunc mix_modes(const CxFunc &gram, const CxFunc &p, const Halide::Expr &modes, const std::string &name,
                 Halide::RDom &r);

}  // namespace fsattn
