#include "scan.h"

using namespace Halide;

namespace fsattn {

namespace {
Cx zero_like(bool real) { return real ? Cx(0.0f) : Cx(0.0f, 0.0f); }

// λ^lag(tau, i) for one decay per head, as an L×L table per head (the clamped entries are
// never read: every use is masked to the contributing tokens).
Func decay_by_lag(const ScanInputs &in, const ChunkGrid &g, const std::string &name) {
  const Vars &v = vars();
  Func f(name);
  f(v.tau, v.i, v.h) = in.decay_pow(max(g.lag(v.tau, v.i), 0), 0, v.h).re;
  return f;
}

// The write weight of token tau on slot m, in the head (and batch, where it matters) of the
// stage being defined.
Cx write_at(const ScanInputs &in, const Expr &m, const Expr &tau, const Expr &c) {
  const Vars &v = vars();
  return in.write(m, tau, c, v.h, in.write_per_batch ? Expr(v.b) : Expr(0));
}
}  // namespace

ScanStages chunked_scan(const ScanInputs &in, const ChunkGrid &g, const CxFunc *shared_coef) {
  const Vars &v = vars();
  const std::string p = in.x.name();
  const bool real = in.decay_pow.is_real() && in.write.is_real();
  ScanStages s;

  // Token i's write reaches the state leaving its chunk after carry_age more decays.
  std::vector<Var> coef_args{v.i, v.m, v.c, v.h};
  if (in.write_per_batch) coef_args.push_back(v.b);
  if (shared_coef != nullptr) {
    s.coef = *shared_coef;
  } else {
    s.coef = CxFunc(p + "_coef", real);
    s.coef.define(coef_args, in.decay_pow(g.carry_age(v.i, v.c), v.m, v.h) * write_at(in, v.m, v.i, v.c));
  }

  s.carry = CxFunc(p + "_carry", real);
  s.carry_tokens = RDom(0, g.L, p + "_carry_tokens");
  const RVar &k = s.carry_tokens.x;
  std::vector<Expr> coef_at{k, v.m, v.c, v.h};
  if (in.write_per_batch) coef_at.push_back(v.b);
  s.carry.define({v.r, v.m, v.c, v.h, v.b}, zero_like(real));
  s.carry.update({v.r, v.m, v.c, v.h, v.b},
                 s.carry(v.r, v.m, v.c, v.h, v.b) + s.coef.at(coef_at) * Cx(in.x(v.r, k, v.c, v.h, v.b)));

  // The only serial part: forward, state(c + 1) = λ^len_c state(c) + carry(c); in reverse,
  // state(c) = λ^len_c state(c + 1) + carry(c), chunks visited from the last. There is no
  // pure value to write first: the first update sets the entering state, the second the rest.
  s.state = CxFunc(p + "_state", real);
  s.chunks = RDom(0, g.N, p + "_chunks");
  const Expr c = g.reverse ? g.N - 1 - s.chunks.x : Expr(s.chunks.x);
  Cx init = in.init(v.r, v.m, v.h, v.b);
  if (init.is_real() != real) init = real ? Cx(init.re) : Cx(init.re, init.imag());
  s.state.define_undef({v.r, v.m, v.c, v.h, v.b});
  s.state.update({v.r, v.m, g.reverse ? g.N : Expr(0), v.h, v.b}, init);
  const Expr from = g.entering(c), to = g.reverse ? c : c + 1;
  s.state.update({v.r, v.m, to, v.h, v.b}, in.decay_pow(g.length(c), v.m, v.h) * s.state(v.r, v.m, from, v.h, v.b) +
                                               s.carry(v.r, v.m, c, v.h, v.b));
  return s;
}

ChannelRead read_by_channels(const ScanInputs &in, const ScanStages &s, const Func &query, const ChunkGrid &g,
                             const std::string &prefix) {
  const Vars &v = vars();
  const bool real = s.state.is_real() && in.decay_pow.is_real() && in.write.is_real();
  ChannelRead rd;

  // Through the chunk's entering state: λ^read_age (X_s · query_i).
  rd.r_inter = RDom(0, in.channels, prefix + "_r_inter");
  rd.inter = CxFunc(prefix + "_inter", s.state.is_real());
  rd.inter.define({v.m, v.i, v.c, v.h, v.b}, zero_like(s.state.is_real()));
  rd.inter.update({v.m, v.i, v.c, v.h, v.b},
                  rd.inter(v.m, v.i, v.c, v.h, v.b) +
                      s.state(rd.r_inter, v.m, g.entering(v.c), v.h, v.b) * Cx(query(rd.r_inter, v.i, v.c, v.h, v.b)));

  // Within the chunk: Σ_tau (query_i · x_tau) λ^lag b_tau over the contributing tokens.
  rd.r_qx = RDom(0, in.channels, prefix + "_r_qx");
  rd.qx = Func(prefix + "_qx");
  rd.qx(v.tau, v.i, v.c, v.h, v.b) = 0.0f;
  rd.qx(v.tau, v.i, v.c, v.h, v.b) += query(rd.r_qx, v.i, v.c, v.h, v.b) * in.x(rd.r_qx, v.tau, v.c, v.h, v.b);

  rd.intra = CxFunc(prefix + "_intra", real);
  rd.intra.define({v.m, v.i, v.c, v.h, v.b}, zero_like(real));
  Cx term;
  if (g.lag_channel_reads() && in.decay_per_slot && !in.write_per_token && !g.reverse) {
    // Summed over the lag n = i - tau: λ_m^n is then a row of the decay table along the
    // reduction, which a register tile copies as vectors, where read at each pair's lag every
    // multiply-add loaded its own power. Over the whole chunk, the lags past i masked by a
    // select on qx at a clamped index (so a NaN in a later token's qx never reaches token i).
    // (Forward and with one write weight per slot only: the reverse scans' reads, whose write
    // weight is per token, trapped on the H200 in this form.)
    rd.r_intra = RDom(0, g.L, prefix + "_r_intra");
    const RVar &n = rd.r_intra.x;
    term = Cx(select(n <= v.i, rd.qx(max(v.i - n, 0), v.i, v.c, v.h, v.b), 0.0f)) * in.decay_pow(n, v.m, v.h);
  } else {
    rd.r_intra = g.contributing_tokens(v.i, prefix + "_r_intra");
    const RVar &tau = rd.r_intra.x;
    if (!in.decay_per_slot) {
      // The decay is one number per head: fold it into the L×L matrix, then one matmul.
      rd.decay_lag = decay_by_lag(in, g, prefix + "_decay_lag");
      rd.qxd = Func(prefix + "_qxd");
      rd.qxd(v.tau, v.i, v.c, v.h, v.b) = rd.qx(v.tau, v.i, v.c, v.h, v.b) * rd.decay_lag(v.tau, v.i, v.h);
      term = Cx(rd.qxd(tau, v.i, v.c, v.h, v.b)) * write_at(in, v.m, tau, v.c);
    } else {
      term = Cx(rd.qx(tau, v.i, v.c, v.h, v.b)) * in.decay_pow(g.lag(tau, v.i), v.m, v.h);
      if (in.write_per_token) term = term * write_at(in, v.m, tau, v.c);
    }
    term =
        term.is_real() ? Cx(g.causal(term.re, tau, v.i)) : Cx(g.causal(term.re, tau, v.i), g.causal(term.im, tau, v.i));
  }
  rd.intra.update({v.m, v.i, v.c, v.h, v.b}, rd.intra(v.m, v.i, v.c, v.h, v.b) + term);

  Cx intra = rd.intra(v.m, v.i, v.c, v.h, v.b);
  if (in.decay_per_slot && !in.write_per_token) intra = intra * write_at(in, v.m, 0, 0);
  rd.out = CxFunc(prefix + "_out", real);
  rd.out.define({v.m, v.i, v.c, v.h, v.b},
                in.decay_pow(g.read_age(v.i, v.c), v.m, v.h) * rd.inter(v.m, v.i, v.c, v.h, v.b) + intra);
  return rd;
}

SlotRead read_by_slots(const ScanInputs &in, const ScanStages &s, const CxFunc &u, const ChunkGrid &grid,
                       const std::string &prefix, bool u_per_token) {
  const Vars &v = vars();
  const ChunkGrid g = grid.slot_reads();
  SlotRead rd;

  // Through the chunk's entering state: Re Σ_m u_i[m] λ_m^read_age X_s[m, r].
  rd.ud = CxFunc(prefix + "_ud", u.is_real() && in.decay_pow.is_real());
  rd.ud.define({v.m, v.i, v.c, v.h, v.b}, u(v.m, v.i, v.c, v.h, v.b) * in.decay_pow(g.read_age(v.i, v.c), v.m, v.h));
  rd.r_inter = RDom(0, in.slots, prefix + "_r_inter");
  rd.inter = Func(prefix + "_inter");
  rd.inter(v.r, v.i, v.c, v.h, v.b) = 0.0f;
  rd.inter(v.r, v.i, v.c, v.h, v.b) +=
      real_of_product(rd.ud(rd.r_inter, v.i, v.c, v.h, v.b), s.state(v.r, rd.r_inter, g.entering(v.c), v.h, v.b));

  // Within the chunk: e[tau, i] = Re Σ_m u_i[m] λ_m^lag b_tau[m], then e · x.
  rd.r_e = RDom(0, in.slots, prefix + "_r_e");
  const RVar &mm = rd.r_e.x;
  rd.e = Func(prefix + "_e");
  rd.r_intra = g.contributing_tokens(v.i, prefix + "_r_intra");
  const RVar &tau = rd.r_intra.x;
  Expr e;  // e[tau, i] at the reduction's tau
  if (!in.decay_per_slot) {
    // One decay per head: e = λ^lag (u_i · b_tau), a plain matmul over slots.
    rd.e(v.tau, v.i, v.c, v.h, v.b) = 0.0f;
    rd.e(v.tau, v.i, v.c, v.h, v.b) += real_of_product(u(mm, v.i, v.c, v.h, v.b), write_at(in, mm, v.tau, v.c));
    rd.decay_lag = decay_by_lag(in, g, prefix + "_decay_lag");
    e = rd.e(tau, v.i, v.c, v.h, v.b) * rd.decay_lag(tau, v.i, v.h);
  } else if (!in.write_per_token || !u_per_token) {
    // One write weight per slot: fold it into u once per token; then e depends on tau only
    // through the lag n, and is indexed by it: e[n, i] = Re Σ_m (u_i b)[m] λ_m^n, a matmul
    // against the decay table itself. Likewise with the roles swapped, for one read weight
    // per slot (an adjoint's read of its state): e[n, tau] = Re Σ_m (u b_tau)[m] λ_m^n.
    rd.uw = CxFunc(prefix + "_uw", u.is_real() && in.write.is_real());
    if (!in.write_per_token) {
      rd.uw.define({v.m, v.i, v.c, v.h, v.b}, u(v.m, v.i, v.c, v.h, v.b) * write_at(in, v.m, 0, 0));
    } else {
      rd.uw.define({v.m, v.i, v.c, v.h, v.b}, u(v.m, 0, 0, v.h, v.b) * write_at(in, v.m, v.i, v.c));
    }
    rd.e(v.n, v.i, v.c, v.h, v.b) = 0.0f;
    rd.e(v.n, v.i, v.c, v.h, v.b) += real_of_product(rd.uw(mm, v.i, v.c, v.h, v.b), in.decay_pow(v.n, mm, v.h));
    const Expr token = in.write_per_token ? Expr(tau) : Expr(v.i);
    e = rd.e(max(g.lag(tau, v.i), 0), token, v.c, v.h, v.b);
  } else {
    rd.e(v.tau, v.i, v.c, v.h, v.b) = 0.0f;
    rd.e(v.tau, v.i, v.c, v.h, v.b) += real_of_product(u(mm, v.i, v.c, v.h, v.b) * write_at(in, mm, v.tau, v.c),
                                                       in.decay_pow(max(g.lag(v.tau, v.i), 0), mm, v.h));
    e = rd.e(tau, v.i, v.c, v.h, v.b);
  }
  rd.intra = Func(prefix + "_intra");
  rd.intra(v.r, v.i, v.c, v.h, v.b) = 0.0f;
  rd.intra(v.r, v.i, v.c, v.h, v.b) += g.causal(e * in.x(v.r, tau, v.c, v.h, v.b), tau, v.i);

  rd.out = Func(prefix + "_out");
  rd.out(v.r, v.i, v.c, v.h, v.b) = rd.inter(v.r, v.i, v.c, v.h, v.b) + rd.intra(v.r, v.i, v.c, v.h, v.b);
  return rd;
}

}  // namespace fsattn
