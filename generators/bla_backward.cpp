#include "bla_backward.h"

using namespace Halide;

namespace fsattn {

BlaBackwardStages bla_backward_algorithm(const BlaBackwardInputs &in, int chunk) {
  const Vars &x = vars();
  BlaBackwardStages s{bla_forward_algorithm(in.forward, chunk)};
  const BlaForwardStages &f = s.fwd;
  const ChunkGrid &g = f.grid;
  const ChunkGrid back = g.reversed();
  const Expr slots = in.forward.slots, dk = in.forward.dk, dv = in.forward.dv;

  // The softmax's adjoint: dz = scale π (dπ − Σ π dπ).
  s.d_o = chunked(in.d_o, dv, g, "d_o_chunked");
  s.dpi = read_by_channels(f.value_in, f.value_scan, s.d_o, g, "dpi");
  const CxFunc &pi = f.softmax.pi;
  s.r_delta = RDom(0, slots, "r_delta");
  s.delta = Func("delta");
  s.delta(x.i, x.c, x.h, x.b) = 0.0f;
  s.delta(x.i, x.c, x.h, x.b) += pi(s.r_delta, x.i, x.c, x.h, x.b).re * s.dpi.out(s.r_delta, x.i, x.c, x.h, x.b).re;
  s.dz = CxFunc("dz", true);
  Expr dz = in.forward.scale * pi(x.m, x.i, x.c, x.h, x.b).re *
            (s.dpi.out(x.m, x.i, x.c, x.h, x.b).re - s.delta(x.i, x.c, x.h, x.b));
  s.dz.define({x.m, x.i, x.c, x.h, x.b}, Cx(select(g.valid(x.i, x.c), dz, 0.0f)));

  // dq_t = Ks_t^T dz_t: the forward key state read by slots.
  s.dq_read = read_by_slots(f.key_in, f.key_scan, s.dz, g, "dq");

  // The state adjoints, scanned from the last token; read by φ (the forward's write weights).
  s.key_adj_in = {f.writes.decay_pow, false, s.dz, true, f.q,
                  real_state(in.d_state_k_out, "seed_k"), slots, dk, /*write_per_batch=*/true};
  s.key_adj = chunked_scan(s.key_adj_in, back);
  s.dk_read = read_by_slots(s.key_adj_in, s.key_adj, f.writes.write, back, "dk");
  s.value_adj_in = {f.writes.decay_pow, false, pi, true, s.d_o,
                    real_state(in.d_state_v_out, "seed_v"), slots, dv, /*write_per_batch=*/true};
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

  // d log γ (see the header). Per token, with i its index in its chunk:
  const Expr i = x.t % chunk, c = x.t / chunk;
  s.r_zdz = RDom(0, slots, "r_zdz");
  s.r_kdk = RDom(0, dk, "r_kdk");
  s.r_vdv = RDom(0, dv, "r_vdv");
  Expr zdz = sum(s.dz(s.r_zdz, i, c, x.h, x.b).re * f.z.out(s.r_zdz, i, c, x.h, x.b).re, "zdz");
  Expr kdk = sum(in.forward.k(s.r_kdk, x.h, x.t, x.b) * s.dk(s.r_kdk, x.h, x.t, x.b), "kdk");
  Expr vdv = sum(in.forward.v(s.r_vdv, x.h, x.t, x.b) * s.dv(s.r_vdv, x.h, x.t, x.b), "vdv");
  s.token_term = Func("token_term");
  s.token_term(x.t, x.h, x.b) = cast<float>(i + 1) * (s.delta(i, c, x.h, x.b) + zdz - vdv - kdk);
  // Per chunk: the adjoint entering it from the right against the forward state leaving it.
  s.r_end_k = RDom(0, dk, 0, slots, "r_end_k");
  s.r_end_v = RDom(0, dv, 0, slots, "r_end_v");
  auto end_product = [&](const ScanStages &fwd, const ScanStages &adj, const RDom &r) {
    return sum(adj.state(r.x, r.y, x.c + 1, x.h, x.b).re * fwd.state(r.x, r.y, x.c + 1, x.h, x.b).re);
  };
  s.chunk_term = Func("chunk_term");
  s.chunk_term(x.c, x.h, x.b) = cast<float>(g.length(x.c)) * (end_product(f.key_scan, s.key_adj, s.r_end_k) +
                                                               end_product(f.value_scan, s.value_adj, s.r_end_v));
  // Summed in double, in a fixed order.
  s.r_tokens = RDom(0, g.T, "r_tokens");
  s.r_chunks = RDom(0, g.N, "r_chunks");
  s.d_log_gamma = Func("d_log_gamma");
  s.d_log_gamma(x.h, x.b) = cast<float>(sum(cast<double>(s.token_term(s.r_tokens, x.h, x.b)), "sum_tokens") +
                                        sum(cast<double>(s.chunk_term(s.r_chunks, x.h, x.b)), "sum_chunks"));
  return s;
}

}  // namespace fsattn
