#include "step.h"

using namespace Halide;

namespace fsattn {

Func clamped_view(const Func &b, const std::vector<Expr> &mins, const std::vector<Expr> &extents,
                  const std::vector<int> &dims) {
  std::vector<Var> args;
  std::vector<Expr> at;
  for (size_t d = 0; d < mins.size(); ++d) {
    args.push_back(Var("c" + std::to_string(d)));
    at.push_back(args.back());
  }
  for (int d : dims) at[d] = clamp(at[d], mins[d], mins[d] + extents[d] - 1);
  Func f(b.name() + "_clamped");
  f(args) = b(at);
  return f;
}

IdaStepStages ida_step_algorithm(const IdaStepInputs &in) {
  const Vars &x = vars();
  IdaStepStages s{ChunkGrid(Expr(1), 1)};
  s.feat = ida_features(in.q, in.k, in.v, in.gk, in.bk, in.gv, in.bv, in.eps, in.dk, in.dv, s.grid);
  s.modes = ida_modes(in.log_dt, in.a_re_log, in.a_im, in.b_mode);

  // X' = Λ X + B x.
  const Cx lambda = s.modes.decay_pow(1, x.m, x.h), b = s.modes.write(x.m, 0, 0, x.h, 0);
  // The new state twice, alike: `next` for the write, `read` for the token's read of it, so
  // that a schedule can give the write a copy of its own of the old (re, im) pairs
  // (schedules/cuda/).
  auto advance = [&](CxFunc &next, CxFunc &read, Func &out, const Func &state, const Func &xs,
                     const std::string &name) {
    for (auto [f, suffix] : {std::pair(&next, "_new"), std::pair(&read, "_read")}) {
      *f = CxFunc(name + suffix, false);
      f->define({x.r, x.m, x.h, x.b}, lambda * Cx(state(0, x.r, x.m, x.h, x.b), state(1, x.r, x.m, x.h, x.b)) +
                                          b * Cx(xs(x.r, 0, 0, x.h, x.b)));
    }
    out = Func(name + "_out");
    const Cx n = next(x.r, x.m, x.h, x.b);
    out(x.ri, x.r, x.m, x.h, x.b) = select(x.ri == 0, n.re, n.imag());
  };
  advance(s.key_new, s.key_read, s.state_k_out, in.state_k, s.feat.kt, "state_k");
  advance(s.value_new, s.value_read, s.state_v_out, in.state_v, s.feat.vt, "state_v");
  s.state_k_in = in.state_k;
  s.state_v_in = in.state_v;
  s.c_mix = in.c_mix;

  // p = Xk fq; w = G p as C^T (C p) (G = C^T C, plain transposes); o = Re(Xv^T w).
  auto c_at = [&](const Expr &row, const Expr &col) {
    return Cx(in.c_mix(0, col, row, x.h), in.c_mix(1, col, row, x.h));
  };
  s.r_p = RDom(0, in.dk, "r_p");
  s.p = CxFunc("p", false);
  s.p.define({x.m, x.h, x.b}, Cx(0.0f, 0.0f));
  s.p.update({x.m, x.h, x.b},
             s.p(x.m, x.h, x.b) + s.key_read(s.r_p, x.m, x.h, x.b) * Cx(s.feat.fq(s.r_p, 0, 0, x.h, x.b)));
  s.r_cp = RDom(0, in.modes, "r_cp");
  s.cp = CxFunc("cp", false);
  s.cp.define({x.m, x.h, x.b}, Cx(0.0f, 0.0f));
  s.cp.update({x.m, x.h, x.b}, s.cp(x.m, x.h, x.b) + c_at(x.m, s.r_cp) * s.p(s.r_cp, x.h, x.b));
  s.r_w = RDom(0, in.modes, "r_w");
  s.w = CxFunc("w", false);
  s.w.define({x.m, x.h, x.b}, Cx(0.0f, 0.0f));
  s.w.update({x.m, x.h, x.b}, s.w(x.m, x.h, x.b) + c_at(s.r_w, x.m) * s.cp(s.r_w, x.h, x.b));
  s.r_o = RDom(0, in.modes, "r_o");
  s.o_sum = Func("o_sum");
  s.o_sum(x.r, x.h, x.t, x.b) = 0.0f;
  s.o_sum(x.r, x.h, x.t, x.b) += real_of_product(s.w(s.r_o, x.h, x.b), s.value_read(x.r, s.r_o, x.h, x.b));
  s.o = Func("o");
  s.o(x.r, x.h, x.t, x.b) = s.o_sum(x.r, x.h, x.t, x.b);
  return s;
}

BlaStepStages bla_step_algorithm(const BlaStepInputs &in) {
  const Vars &x = vars();
  BlaStepStages s{ChunkGrid(Expr(1), 1)};
  s.writes = bla_writes(in.log_gamma, in.phase, in.modes, in.period, in.slots, s.grid);
  const Expr gamma = s.writes.gamma_pow(1, x.h), phi = s.writes.phi(x.m, 0, 0);
  auto advance = [&](Func &next, Func &out, const Func &state, const Func &xs, const std::string &name) {
    next = Func(name + "_new");
    next(x.r, x.m, x.h, x.b) = gamma * state(x.r, x.m, x.h, x.b) + phi * xs(x.r, x.h, 0, x.b);
    out = Func(name + "_out");
    out(x.r, x.m, x.h, x.b) = next(x.r, x.m, x.h, x.b);
  };
  advance(s.key_new, s.state_k_out, in.state_k, in.k, "state_k");
  advance(s.value_new, s.state_v_out, in.state_v, in.v, "state_v");
  s.v = in.v;
  s.state_v_in = in.state_v;

  s.r_z = RDom(0, in.dk, "r_z");
  s.z = Func("z");
  s.z(x.m, x.h, x.b) = 0.0f;
  s.z(x.m, x.h, x.b) += s.key_new(s.r_z, x.m, x.h, x.b) * in.q(s.r_z, x.h, 0, x.b);
  // π = softmax(scale z): scale > 0, so the largest exponent is scale (z − zmax) = 0.
  s.r_max = RDom(0, in.slots, "r_max");
  s.zmax = Func("zmax");
  s.zmax(x.h, x.b) = Float(32).min();
  s.zmax(x.h, x.b) = max(s.zmax(x.h, x.b), s.z(s.r_max, x.h, x.b));
  s.ez = Func("ez");
  s.ez(x.m, x.h, x.b) = exp(in.scale * (s.z(x.m, x.h, x.b) - s.zmax(x.h, x.b)));
  s.r_den = RDom(0, in.slots, "r_den");
  s.den = Func("den");
  s.den(x.h, x.b) = 0.0f;
  s.den(x.h, x.b) += s.ez(s.r_den, x.h, x.b);
  s.r_o = RDom(0, in.slots, "r_o");
  s.o_sum = Func("o_sum");
  s.o_sum(x.r, x.h, x.t, x.b) = 0.0f;
  s.o_sum(x.r, x.h, x.t, x.b) += s.ez(s.r_o, x.h, x.b) * s.value_new(x.r, s.r_o, x.h, x.b);
  s.o = Func("o");
  s.o(x.r, x.h, x.t, x.b) = s.o_sum(x.r, x.h, x.t, x.b) / s.den(x.h, x.b);
  return s;
}

}  // namespace fsattn
