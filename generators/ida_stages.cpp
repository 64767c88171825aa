#include "ida_stages.h"

using namespace Halide;

namespace fsattn {

namespace {
Expr silu(const Expr &x) { return x / (1.0f + exp(-x)); }
}  // namespace

IdaFeatures ida_features(const Func &q, const Func &k, const Func &v, const Func &gk, const Func &bk, const Func &gv,
                         const Func &bv, const Expr &eps, const Expr &dk, const Expr &dv, const ChunkGrid &g) {
  const Vars &x = vars();
  IdaFeatures f;
  f.q = chunked(q, dk, g, "q_chunked");
  f.k = chunked(k, dk, g, "k_chunked");
  f.v = chunked(v, dv, g, "v_chunked");
  f.rk = RDom(0, dk, "rk");
  f.rv = RDom(0, dv, "rv");

  // xi(x) = silu(x) / sqrt(Σ silu(x)^2 + eps)
  f.q_act = Func("q_act");
  f.q_act(x.r, x.i, x.c, x.h, x.b) = silu(f.q(x.r, x.i, x.c, x.h, x.b));
  f.k_act = Func("k_act");
  f.k_act(x.r, x.i, x.c, x.h, x.b) = silu(f.k(x.r, x.i, x.c, x.h, x.b));
  f.q_ssq = Func("q_ssq");
  f.q_ssq(x.i, x.c, x.h, x.b) = 0.0f;
  f.q_ssq(x.i, x.c, x.h, x.b) += pow(f.q_act(f.rk, x.i, x.c, x.h, x.b), 2);
  f.fq = Func("fq");
  f.fq(x.r, x.i, x.c, x.h, x.b) = f.q_act(x.r, x.i, x.c, x.h, x.b) / sqrt(f.q_ssq(x.i, x.c, x.h, x.b) + eps);

  f.k_ssq = Func("k_ssq");
  f.k_ssq(x.i, x.c, x.h, x.b) = 0.0f;
  f.k_ssq(x.i, x.c, x.h, x.b) += pow(f.k_act(f.rk, x.i, x.c, x.h, x.b), 2);
  // mean_r xi(k)_r^2 = ssq / (ssq + eps) / Dk: the RMSNorm of xi(k) needs no second pass.
  f.k_msq = Func("k_msq");
  Expr ssq = f.k_ssq(x.i, x.c, x.h, x.b);
  f.k_msq(x.i, x.c, x.h, x.b) = ssq / (ssq + eps) / cast<float>(dk);
  Expr xi_k = f.k_act(x.r, x.i, x.c, x.h, x.b) / sqrt(ssq + eps);
  f.kt = Func("kt");
  f.kt(x.r, x.i, x.c, x.h, x.b) =
      select(g.valid(x.i, x.c), xi_k / sqrt(f.k_msq(x.i, x.c, x.h, x.b) + eps) * gk(x.r, x.h) + bk(x.r, x.h), 0.0f);

  // The mean divided once, after the sum (each square divided by Dv, the CUDA decode step's
  // feature kernel took 12.3 µs instead of 8.1 at B=64 H=32 Dv=64, H200).
  f.v_ssq = Func("v_ssq");
  f.v_ssq(x.i, x.c, x.h, x.b) = 0.0f;
  f.v_ssq(x.i, x.c, x.h, x.b) += pow(f.v(f.rv, x.i, x.c, x.h, x.b), 2);
  f.v_msq = Func("v_msq");
  f.v_msq(x.i, x.c, x.h, x.b) = f.v_ssq(x.i, x.c, x.h, x.b) / cast<float>(dv);
  f.vt = Func("vt");
  f.vt(x.r, x.i, x.c, x.h, x.b) = select(
      g.valid(x.i, x.c),
      f.v(x.r, x.i, x.c, x.h, x.b) / sqrt(f.v_msq(x.i, x.c, x.h, x.b) + eps) * gv(x.r, x.h) + bv(x.r, x.h), 0.0f);
  return f;
}

IdaModes ida_modes(const Func &log_dt, const Func &a_re_log, const Func &a_im, const Func &b_mode) {
  const Vars &x = vars();
  IdaModes md;
  // n Δ Im A reaches thousands of radians (Im A ~ M^2/π); its phase is formed in double so
  // that cos/sin stay accurate to float32 rounding. The table is (L+1)·M·H entries.
  Expr dt = exp(cast<double>(log_dt(x.h)));
  Expr n = cast<double>(x.n);
  Expr log_mag = -n * dt * exp(cast<double>(a_re_log(x.m, x.h)));
  Expr phase = n * dt * cast<double>(a_im(x.m, x.h));
  md.decay_pow = CxFunc("decay_pow", false);
  md.decay_pow.define({x.n, x.m, x.h}, cast_cx(Float(32), exp_polar(log_mag, phase)));
  md.write = CxFunc("write", false);
  md.write.define({x.m, x.i, x.c, x.h, x.b}, Cx(b_mode(0, x.m, x.h), b_mode(1, x.m, x.h)));
  return md;
}

IdaMixing ida_mixing(const Func &c_mix, const CxFunc &p, const Expr &modes) {
  const Vars &x = vars();
  IdaMixing mx;
  // G is accumulated in double: it is M^3 work per head, once per call.
  mx.r_gram = RDom(0, modes, "r_gram");
  mx.gram64 = CxFunc("gram64", false);
  auto c_at = [&](const Expr &row, const Expr &col) {
    return Cx(cast<double>(c_mix(0, col, row, x.h)), cast<double>(c_mix(1, col, row, x.h)));
  };
  mx.gram64.define({x.m, x.m2, x.h}, Cx(Expr(0.0), Expr(0.0)));
  mx.gram64.update({x.m, x.m2, x.h}, mx.gram64(x.m, x.m2, x.h) + c_at(mx.r_gram, x.m) * c_at(mx.r_gram, x.m2));
  mx.gram = CxFunc("gram", false);
  mx.gram.define({x.m, x.m2, x.h}, cast_cx(Float(32), mx.gram64(x.m, x.m2, x.h)));

  mx.w = mix_modes(mx.gram, p, modes, "w", mx.r_w);
  return mx;
}

CxFunc mix_modes(const CxFunc &gram, const CxFunc &p, const Expr &modes, const std::string &name, RDom &r) {
  const Vars &x = vars();
  r = RDom(0, modes, "r_" + name);
  CxFunc out(name, false);
  out.define({x.m, x.i, x.c, x.h, x.b}, Cx(0.0f, 0.0f));
  out.update({x.m, x.i, x.c, x.h, x.b}, out(x.m, x.i, x.c, x.h, x.b) + gram(x.m, r, x.h) * p(r, x.i, x.c, x.h, x.b));
  return out;
}

}  // namespace fsattn
