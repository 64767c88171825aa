#include "ida_backward.h"

using namespace Halide;

namespace fsattn {

namespace {
Expr sigmoid(const Expr &x) { return 1.0f / (1.0f + exp(-x)); }
// d silu / dx
Expr silu_grad(const Expr &x) { return sigmoid(x) * (1.0f + x * (1.0f - sigmoid(x))); }
}  // namespace

IdaBackwardStages ida_backward_algorithm(const IdaBackwardInputs &in, int chunk, Masking masking) {
  const Vars &x = vars();
  IdaBackwardStages s{ida_forward_algorithm(in.forward, chunk, masking)};
  const IdaForwardStages &f = s.fwd;
  const IdaFeatures &ft = f.feat;
  const ChunkGrid &g = f.grid;
  const ChunkGrid back = g.reversed();
  const Expr M = in.forward.modes, dk = in.forward.dk, dv = in.forward.dv, eps = in.forward.eps;
  const std::vector<Var> tok{x.m, x.i, x.c, x.h, x.b};
  auto at = [&](const CxFunc &fn) { return fn(x.m, x.i, x.c, x.h, x.b); };

  // g_w = conj(Σ_c Xv d_o), g_p = conj(G^T conj(g_w)) = conj(G gw_read) (G is symmetric).
  s.d_o = chunked(in.d_o, dv, g, "d_o_chunked");
  s.gw_read = read_by_channels(f.value_in, f.value_scan, s.d_o, g, "gw");
  s.w2 = mix_modes(f.mix.gram, s.gw_read.out, M, "w2", s.r_w2);
  s.gp = CxFunc("gp", false);
  s.gp.define(tok, conj(at(s.w2)));
  s.w_conj = CxFunc("w_conj", false);
  s.w_conj.define(tok, conj(at(f.mix.w)));
  s.conj_decay = CxFunc("conj_decay", false);
  s.conj_decay.define({x.n, x.m, x.h}, conj(f.modes.decay_pow(x.n, x.m, x.h)));
  s.conj_b = CxFunc("conj_b", false);
  s.conj_b.define(tok, conj(f.modes.write(x.m, 0, 0, x.h, 0)));

  // ∂L/∂fq = Re Σ_m conj(g_p) Xk = Re Σ_m w2 Xk: the forward key state read by slots.
  s.dfq_read = read_by_slots(f.key_in, f.key_scan, s.w2, g, "dfq");

  // The state adjoints, scanned from the last token with decay conj(Λ).
  s.key_adj_in = {s.conj_decay,
                  true,
                  s.gp,
                  true,
                  ft.fq,
                  complex_state(in.d_state_k_out, "seed_k"),
                  M,
                  dk,
                  /*write_per_batch=*/true};
  s.key_adj = chunked_scan(s.key_adj_in, back);
  s.dkt_read = read_by_slots(s.key_adj_in, s.key_adj, s.conj_b, back, "dkt", /*u_per_token=*/false);
  s.hk_read = read_by_channels(s.key_adj_in, s.key_adj, ft.kt, back, "hk");
  s.value_adj_in = {s.conj_decay,
                    true,
                    s.w_conj,
                    true,
                    s.d_o,
                    complex_state(in.d_state_v_out, "seed_v"),
                    M,
                    dv,
                    /*write_per_batch=*/true};
  s.value_adj = chunked_scan(s.value_adj_in, back);
  s.dvt_read = read_by_slots(s.value_adj_in, s.value_adj, s.conj_b, back, "dvt", /*u_per_token=*/false);
  s.hv_read = read_by_channels(s.value_adj_in, s.value_adj, ft.vt, back, "hv");

  // The feature maps' adjoints (docs/spec.md §1: fq = xi(q), kt = rms(xi(k)) gk + bk,
  // vt = rms(v) gv + bv), per token.
  // Each norm's adjoint needs one sum over the channels per token: (i, c, h, b) =
  // Σ_r a(r) b(r), with a, b stages (r, i, c, h, b).
  auto channel_dot = [&](const std::string &name, const Expr &channels, RDom &r, const Func &a, const Func &b) {
    r = RDom(0, channels, "r_" + name);
    Func dot(name);
    dot(x.i, x.c, x.h, x.b) = 0.0f;
    dot(x.i, x.c, x.h, x.b) += a(r, x.i, x.c, x.h, x.b) * b(r, x.i, x.c, x.h, x.b);
    return dot;
  };
  const Func &dfq = s.dfq_read.out, &dkt = s.dkt_read.out, &dvt = s.dvt_read.out;
  s.q_dot = channel_dot("q_dot", dk, s.r_qdot, dfq, ft.fq);
  Func dq_chunked("dq_chunked");
  dq_chunked(x.r, x.i, x.c, x.h, x.b) =
      (dfq(x.r, x.i, x.c, x.h, x.b) - ft.fq(x.r, x.i, x.c, x.h, x.b) * s.q_dot(x.i, x.c, x.h, x.b)) /
      sqrt(ft.q_ssq(x.i, x.c, x.h, x.b) + eps) * silu_grad(ft.q(x.r, x.i, x.c, x.h, x.b));

  const Expr k_norm = sqrt(ft.k_ssq(x.i, x.c, x.h, x.b) + eps), k_rms = sqrt(ft.k_msq(x.i, x.c, x.h, x.b) + eps);
  s.kn = Func("kn");
  s.kn(x.r, x.i, x.c, x.h, x.b) = ft.k_act(x.r, x.i, x.c, x.h, x.b) / k_norm / k_rms;
  Func g_kn("g_kn"), xi_k("xi_k");
  g_kn(x.r, x.i, x.c, x.h, x.b) = dkt(x.r, x.i, x.c, x.h, x.b) * in.forward.gk(x.r, x.h);
  xi_k(x.r, x.i, x.c, x.h, x.b) = ft.k_act(x.r, x.i, x.c, x.h, x.b) / k_norm;
  s.k_dot = channel_dot("k_dot", dk, s.r_kdot, g_kn, s.kn);
  s.g_xk = Func("g_xk");
  s.g_xk(x.r, x.i, x.c, x.h, x.b) =
      (g_kn(x.r, x.i, x.c, x.h, x.b) - s.kn(x.r, x.i, x.c, x.h, x.b) * s.k_dot(x.i, x.c, x.h, x.b) / cast<float>(dk)) /
      k_rms;
  s.k_xdot = channel_dot("k_xdot", dk, s.r_kxdot, s.g_xk, xi_k);
  Func dk_chunked("dk_chunked");
  dk_chunked(x.r, x.i, x.c, x.h, x.b) =
      (s.g_xk(x.r, x.i, x.c, x.h, x.b) - xi_k(x.r, x.i, x.c, x.h, x.b) * s.k_xdot(x.i, x.c, x.h, x.b)) / k_norm *
      silu_grad(ft.k(x.r, x.i, x.c, x.h, x.b));

  const Expr v_rms = sqrt(ft.v_msq(x.i, x.c, x.h, x.b) + eps);
  s.vn = Func("vn");
  s.vn(x.r, x.i, x.c, x.h, x.b) = ft.v(x.r, x.i, x.c, x.h, x.b) / v_rms;
  Func g_vn("g_vn");
  g_vn(x.r, x.i, x.c, x.h, x.b) = dvt(x.r, x.i, x.c, x.h, x.b) * in.forward.gv(x.r, x.h);
  s.v_dot = channel_dot("v_dot", dv, s.r_vdot, g_vn, s.vn);
  Func dv_chunked("dv_chunked");
  dv_chunked(x.r, x.i, x.c, x.h, x.b) =
      (g_vn(x.r, x.i, x.c, x.h, x.b) - s.vn(x.r, x.i, x.c, x.h, x.b) * s.v_dot(x.i, x.c, x.h, x.b) / cast<float>(dv)) /
      v_rms;

  auto unchunk = [&](const Func &chunked_out, const std::string &name) {
    Func out(name);
    out(x.r, x.h, x.t, x.b) = chunked_out(x.r, x.t % chunk, x.t / chunk, x.h, x.b);
    return out;
  };
  s.dq = unchunk(dq_chunked, "dq");
  s.dk = unchunk(dk_chunked, "dk");
  s.dv = unchunk(dv_chunked, "dv");
  s.d_state_k_in = store_complex(s.key_adj.state, back.exit_index(), "d_state_k_in");
  s.d_state_v_in = store_complex(s.value_adj.state, back.exit_index(), "d_state_v_in");

  // The affine parameters of the norms: sums over the tokens of the call.
  s.r_feature_tokens = RDom(0, g.T, "r_feature_tokens");
  const Expr ti = s.r_feature_tokens % chunk, tcc = s.r_feature_tokens / chunk;
  s.d_gk = Func("d_gk"), s.d_bk = Func("d_bk"), s.d_gv = Func("d_gv"), s.d_bv = Func("d_bv");
  for (Func *out : {&s.d_gk, &s.d_bk, &s.d_gv, &s.d_bv}) (*out)(x.r, x.h, x.b) = 0.0f;
  s.d_gk(x.r, x.h, x.b) += dkt(x.r, ti, tcc, x.h, x.b) * s.kn(x.r, ti, tcc, x.h, x.b);
  s.d_bk(x.r, x.h, x.b) += dkt(x.r, ti, tcc, x.h, x.b);
  s.d_gv(x.r, x.h, x.b) += dvt(x.r, ti, tcc, x.h, x.b) * s.vn(x.r, ti, tcc, x.h, x.b);
  s.d_bv(x.r, x.h, x.b) += dvt(x.r, ti, tcc, x.h, x.b);

  // Λ and B (see the header). Tokens past the end contribute zero: there fq, kt, vt and
  // d_o are zero, and so are p, w, gw_read, hk and hv.
  s.r_tokens = RDom(0, g.L, 0, g.N, "r_tokens");
  const Expr i = s.r_tokens.x, c = s.r_tokens.y;
  auto token_at = [&](const CxFunc &fn) { return fn(x.m, i, c, x.h, x.b); };
  const Cx h_sum = token_at(s.hk_read.out) + token_at(s.hv_read.out);
  const Cx mode_term = token_at(s.w2) * token_at(f.p.out) + token_at(f.mix.w) * token_at(s.gw_read.out) -
                       f.modes.write(x.m, 0, 0, x.h, 0) * conj(h_sum);
  s.mode_terms = CxFunc("mode_terms", false);
  s.mode_terms.define({x.m, x.h, x.b}, Cx(Expr(0.0), Expr(0.0)));
  s.mode_terms.update({x.m, x.h, x.b},
                      s.mode_terms(x.m, x.h, x.b) + Cx(cast<double>(i + 1)) * cast_cx(Float(64), mode_term));
  s.d_b = CxFunc("d_b", false);
  s.d_b.define({x.m, x.h, x.b}, Cx(0.0f, 0.0f));
  s.d_b.update({x.m, x.h, x.b}, s.d_b(x.m, x.h, x.b) + h_sum);
  // Per chunk: the adjoint entering it from the right against the forward state leaving it.
  s.r_chunks_k = RDom(0, dk, 0, g.N, "r_chunks_k");
  s.r_chunks_v = RDom(0, dv, 0, g.N, "r_chunks_v");
  s.end_terms = CxFunc("end_terms", false);
  s.end_terms.define({x.m, x.h, x.b}, Cx(Expr(0.0), Expr(0.0)));
  for (auto [fwd, adj, r] :
       {std::tuple(&f.key_scan, &s.key_adj, &s.r_chunks_k), std::tuple(&f.value_scan, &s.value_adj, &s.r_chunks_v)}) {
    const Expr end = r->y + 1;
    const Cx term = adj->state(r->x, x.m, end, x.h, x.b) * conj(fwd->state(r->x, x.m, end, x.h, x.b));
    s.end_terms.update({x.m, x.h, x.b},
                       s.end_terms(x.m, x.h, x.b) + Cx(cast<double>(g.length(r->y))) * cast_cx(Float(64), term));
  }
  s.d_dta = CxFunc("d_dta", false);
  s.d_dta.define({x.m, x.h, x.b}, conj(s.mode_terms(x.m, x.h, x.b)) + s.end_terms(x.m, x.h, x.b));
  // Δ A = Δ (−exp(A_re_log) + i A_im), Δ = exp(log_dt).
  const Expr dt = exp(cast<double>(in.forward.log_dt(x.h)));
  const Expr a_re = -exp(cast<double>(in.forward.a_re_log(x.m, x.h)));
  const Cx d_dta = s.d_dta(x.m, x.h, x.b);
  s.d_a_re_log = Func("d_a_re_log");
  s.d_a_re_log(x.m, x.h, x.b) = cast<float>(dt * a_re * d_dta.re);
  s.d_a_im = Func("d_a_im");
  s.d_a_im(x.m, x.h, x.b) = cast<float>(dt * d_dta.im);
  s.r_modes = RDom(0, M, "r_modes");
  s.d_log_dt = Func("d_log_dt");
  {
    const RVar &m = s.r_modes.x;
    const Cx g_m = s.d_dta(m, x.h, x.b);
    s.d_log_dt(x.h, x.b) = cast<float>(sum(dt * (g_m.re * -exp(cast<double>(in.forward.a_re_log(m, x.h))) +
                                                 g_m.im * cast<double>(in.forward.a_im(m, x.h)))));
  }
  s.d_b_mode = Func("d_b_mode");
  s.d_b_mode(x.ri, x.m, x.h, x.b) = select(x.ri == 0, s.d_b(x.m, x.h, x.b).re, s.d_b(x.m, x.h, x.b).im);

  // C: with Γ[m, m2] = Σ_tokens gw_read[m] p[m2] = conj(∂L/∂G) and G = C^T C,
  // ∂L/∂C[row, col] = conj(Σ_j (Γ[col, j] + Γ[j, col]) C[row, j]).
  s.r_gram = RDom(0, g.N * g.L, "r_gram");
  const Expr gi = s.r_gram % chunk, gc = s.r_gram / chunk;
  s.gram_grad = CxFunc("gram_grad", false);
  s.gram_grad.define({x.m, x.m2, x.h, x.b}, Cx(0.0f, 0.0f));
  s.gram_grad.update({x.m, x.m2, x.h, x.b}, s.gram_grad(x.m, x.m2, x.h, x.b) +
                                                s.gw_read.out(x.m, gi, gc, x.h, x.b) * f.p.out(x.m2, gi, gc, x.h, x.b));
  s.r_c = RDom(0, M, "r_c");
  s.c_grad = CxFunc("c_grad", false);
  CxFunc &c_grad = s.c_grad;
  c_grad.define({x.m, x.m2, x.h, x.b}, Cx(0.0f, 0.0f));
  {
    const RVar &j = s.r_c.x;
    const Cx c_row_j(in.forward.c_mix(0, j, x.m2, x.h), in.forward.c_mix(1, j, x.m2, x.h));
    c_grad.update({x.m, x.m2, x.h, x.b}, c_grad(x.m, x.m2, x.h, x.b) +
                                             (s.gram_grad(x.m, j, x.h, x.b) + s.gram_grad(j, x.m, x.h, x.b)) * c_row_j);
  }
  s.d_c_mix = Func("d_c_mix");
  const Cx cg = c_grad(x.m, x.m2, x.h, x.b);
  s.d_c_mix(x.ri, x.m, x.m2, x.h, x.b) = select(x.ri == 0, cg.re, -cg.im);
  return s;
}

}  // namespace fsattn
