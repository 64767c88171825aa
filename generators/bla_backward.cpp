#include "bla_backward.h"

using namespace Halide;

namespace fsattn {

BlaBackwardStages bla_backward_algorithm(const BlaBackwardInputs &in, int chunk, Masking masking) {
  const Vars &x = vars();
  BlaBackwardStages s{bla_forward_algorithm(in.forward, chunk, masking)};
  const BlaForwardStages &f = s.fwd;
  const ChunkGrid &g = f.grid;
  const ChunkGrid back = g.reversed();
  const Expr slots = in.forward.slots, dk = in.forward.dk, dv = in.forward.dv;

  // π and z, kept for every token (z for d log γ).
  const std::vector<Var> token_slot{x.m, x.i, x.c, x.h, x.b};
  s.pi_z = Func("pi_z");
  s.pi_z(token_slot) = Tuple(f.softmax.pi(x.m, x.i, x.c, x.h, x.b).re, f.z.out(x.m, x.i, x.c, x.h, x.b).re);
  s.pi = CxFunc("pi_stored", true);
  s.pi.define(token_slot, Cx(s.pi_z(token_slot)[0]));
  const CxFunc &pi = s.pi;

  // The softmax's adjoint: dz = scale π (dπ − Σ π dπ).
  s.d_o = chunked(in.d_o, dv, g, "d_o_chunked");
  s.dpi = read_by_channels(f.value_in, f.value_scan, s.d_o, g, "dpi");
  s.r_delta = RDom(0, slots, "r_delta");
  s.delta = Func("delta");
  s.delta(x.i, x.c, x.h, x.b) = 0.0f;
  s.delta(x.i, x.c, x.h, x.b) += pi(s.r_delta, x.i, x.c, x.h, x.b).re * s.dpi.out(s.r_delta, x.i, x.c, x.h, x.b).re;
  const std::vector<Expr> here(token_slot.begin(), token_slot.end());
  const Expr p = pi.at(here).re, dpi = s.dpi.out.at(here).re, z = s.pi_z(token_slot)[1];
  const Expr dz = select(g.valid(x.i, x.c), in.forward.scale * p * (dpi - s.delta(x.i, x.c, x.h, x.b)), 0.0f);
  // With dz, each token's share of d log γ's slot term (see the header), computed while its
  // operands are at hand: summed from stored π, dπ, dz and z it was a 16 MB pass.
  s.dz_term = Func("dz_term");
  s.dz_term(token_slot) = Tuple(dz, cast<float>(x.i + 1) * (p * dpi + dz * z));
  s.dz = CxFunc("dz", true);
  s.dz.define(token_slot, Cx(s.dz_term(token_slot)[0]));

  // dq_t = Ks_t^T dz_t: the forward key state read by slots.
  s.dq_read = read_by_slots(f.key_in, f.key_scan, s.dz, g, "dq");

  // The state adjoints, scanned from the last token; read by φ (the forward's write weights).
  s.key_adj_in = {f.writes.decay_pow,      false, s.dz, true, f.q, real_state(in.d_state_k_out, "seed_k"), slots, dk,
                  /*write_per_batch=*/true};
  s.key_adj = chunked_scan(s.key_adj_in, back);
  s.dk_read = read_by_slots(s.key_adj_in, s.key_adj, f.writes.write, back, "dk");
  s.value_adj_in = {f.writes.decay_pow,      false, pi, true, s.d_o, real_state(in.d_state_v_out, "seed_v"), slots, dv,
                    /*write_per_batch=*/true};
  s.value_adj = chunked_scan(s.value_adj_in, back);
  s.dv_read = read_by_slots(s.value_adj_in, s.value_adj, f.writes.write, back, "dv");

  auto unchunk = [&](const Func &chunked_out, const std::string &name) {
    Func out(name);
    out(x.r, x.h, x.t, x.b) = chunked_out(x.r, x.t % chunk, x.t / chunk, x.h, x.b);
    return out;
  };
  s.dq = unchunk(s.dq_read.out, "dq");
  s.dk = unchunk(s.dk_read.out, "dk");
  s.dv = unchunk(s.dv_read.out, "dv");
  s.d_state_k_in = final_state(s.key_adj.state, back.exit_index(), "d_state_k_in");
  s.d_state_v_in = final_state(s.value_adj.state, back.exit_index(), "d_state_v_in");

  // d log γ (see the header), each sum split by the dimension its operands are contiguous
  // in (slot or channel) so that it vectorizes, and accumulated in double: the terms cancel.
  // Tokens past the end contribute zero (there d_o, and so dπ and dz, are zero).
  s.r_tokens = RDom(0, g.L, 0, g.N, "r_tokens");
  const Expr i = s.r_tokens.x, c = s.r_tokens.y;
  auto weighted = [&](const Expr &value) { return cast<double>(i + 1) * cast<double>(value); };
  s.slot_terms = Func("slot_terms");
  s.slot_terms(x.m, x.h, x.b) = cast<double>(0);
  s.slot_terms(x.m, x.h, x.b) += cast<double>(s.dz_term(x.m, i, c, x.h, x.b)[1]);
  auto channel_terms = [&](const Func &input, const Func &grad, const std::string &name) {
    Func terms(name);
    const Expr t = g.token(i, c);
    terms(x.r, x.h, x.b) = cast<double>(0);
    terms(x.r, x.h, x.b) +=
        select(t < g.T, weighted(input(x.r, x.h, min(t, g.T - 1), x.b) * grad(x.r, x.h, min(t, g.T - 1), x.b)),
               cast<double>(0));
    return terms;
  };
  s.k_terms = channel_terms(in.forward.k, s.dk, "k_terms");
  s.v_terms = channel_terms(in.forward.v, s.dv, "v_terms");
  // Per chunk: the adjoint entering it from the right against the forward state leaving it.
  s.r_chunks = RDom(0, slots, 0, g.N, "r_chunks");
  auto end_terms = [&](const ScanStages &fwd, const ScanStages &adj, const std::string &name) {
    Func terms(name);
    const Expr m = s.r_chunks.x, end = s.r_chunks.y + 1;
    terms(x.r, x.h, x.b) = cast<double>(0);
    terms(x.r, x.h, x.b) += cast<double>(g.length(s.r_chunks.y)) *
                            cast<double>(adj.state(x.r, m, end, x.h, x.b).re * fwd.state(x.r, m, end, x.h, x.b).re);
    return terms;
  };
  s.k_end_terms = end_terms(f.key_scan, s.key_adj, "k_end_terms");
  s.v_end_terms = end_terms(f.value_scan, s.value_adj, "v_end_terms");
  s.r_slots = RDom(0, slots, "r_slots");
  s.r_dk = RDom(0, dk, "r_dk");
  s.r_dv = RDom(0, dv, "r_dv");
  s.d_log_gamma = Func("d_log_gamma");
  s.d_log_gamma(x.h, x.b) = cast<float>(sum(s.slot_terms(s.r_slots, x.h, x.b), "sum_slots") +
                                        sum(s.k_end_terms(s.r_dk, x.h, x.b) - s.k_terms(s.r_dk, x.h, x.b), "sum_k") +
                                        sum(s.v_end_terms(s.r_dv, x.h, x.b) - s.v_terms(s.r_dv, x.h, x.b), "sum_v"));
  return s;
}

}  // namespace fsattn
