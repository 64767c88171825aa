#include "cpu.h"

using namespace Halide;

namespace fsattn {

namespace {

// Channel, slot and chunk extents are runtime values that may be smaller than a vector
// (Dk = 5, M = 3): vector loops guard their tails instead of shifting inwards, which would
// read before the start of small inputs.
constexpr TailStrategy kTail = TailStrategy::GuardWithIf;
// Register tiles of intermediate stages are computed whole, past the true sizes: a constant
// tile lives in registers, a guarded one was a heap allocation per tile. The stages read
// their inputs through `chunked`, which is zero past the true sizes.
constexpr TailStrategy kTileTail = TailStrategy::RoundUp;

// A reduction f(vec, outer, ...) += g(red, ...) as a register-blocked matmul: each tile of
// k.tile_vectors vectors along `vec` times k.tile_rows values of `outer` is accumulated in registers
// over the whole reduction (f is computed per tile), then stored to a wrapper of f that every
// consumer reads. `vec` must be the dimension the operands are contiguous in. Returns the
// wrapper, for the caller to place. Accumulating in f's own buffer instead loaded and stored
// every accumulator at every step of the reduction: BLA forward (B=2 T=2048 H=4 D=S=64, this
// 2-core AVX-512 Xeon) took 36 ms that way.
Func reduce_in_registers(Func f, const Var &vec, const RVar &red, const Var &outer, const Knobs &k) {
  Var vo(vec.name() + "_vo"), vi(vec.name() + "_vi"), oo(outer.name() + "_oo"), oi(outer.name() + "_oi");
  Func tile = f.in();
  tile.tile(vec, outer, vo, oo, vi, oi, k.vector * k.tile_vectors, k.tile_rows, kTileTail)
      .vectorize(vi, k.vector)
      .unroll(vi)
      .unroll(oi);
  f.compute_at(tile, vo).reorder_storage(vec, outer).vectorize(vec, k.vector).unroll(vec).unroll(outer);
  f.update().reorder(vec, outer, red).vectorize(vec, k.vector).unroll(vec).unroll(outer);
  return tile;
}

// The scan's per-chunk carry in parallel over batch × head × chunk, then the serial pass over
// chunks, parallel across batch × head. `vec` (the slot m or the channel r) is the dimension
// the reads of this state vectorize over, so it is stored innermost.
void schedule_scan_cpu(ScanStages &s, const ScanInputs &in, const Var &vec, const Knobs &k) {
  const Vars &x = vars();
  const Var &other = vec.same_as(x.m) ? x.r : x.m;
  Var bh("bh"), chb("chb");
  Func state = s.state.func();
  // Each chunk's carry is computed inside the serial chunk loop, just before it is used:
  // stored for all chunks it was 16 MB of memory traffic per pass.
  Func carry = s.carry.func();
  const LoopLevel chunk_loop(state, s.chunks.x);
  // Carry weights shared by the batch are computed once per call; those of one batch element
  // (a backward pass's adjoint scans) per chunk, where they are used: stored, they were
  // 4 MB written and read again per scan (B=2 T=2048 H=4 S=64).
  if (in.write_per_batch) {
    s.coef.func().compute_at(chunk_loop).vectorize(x.i, k.vector, kTail);
  } else {
    s.coef.func().compute_root().parallel(x.h);
  }
  if (vec.same_as(x.m)) s.coef.func().reorder_storage(x.m, x.i);
  reduce_in_registers(carry, vec, s.carry_tokens.x, other, k).compute_at(chunk_loop).reorder_storage(vec, other);
  // The chunk's written vectors, copied once: read in place, every broadcast of the carry's
  // inner loop paid for the bounds selects of `chunked`.
  Func(in.x).in(carry).compute_at(chunk_loop).vectorize(x.r, k.vector, kTail);

  state.compute_root().reorder_storage(vec, other);
  state.update(0).reorder(vec, other).fuse(x.h, x.b, bh).parallel(bh).vectorize(vec, k.vector, kTail);
  state.update(1)
      .reorder(vec, other, s.chunks.x, x.h, x.b)
      .fuse(x.h, x.b, bh)
      .parallel(bh)
      .vectorize(vec, k.vector, kTail);
}

// Pass 1 of one chunk, everything at (at, chb): the chunk's query · x products, the read
// through the chunk's start state and the intra-chunk read.
void schedule_channel_read_cpu(ChannelRead &rd, const ScanInputs &in, Func query, Func at, const Var &chb,
                               const Knobs &k) {
  const Vars &x = vars();
  // The chunk's queries, copied once for the reads that broadcast them (per use, every
  // broadcast paid for the bounds selects of `chunked`); not for a query stored already.
  if (query.defined()) query.in({rd.qx, rd.inter.func()}).compute_at(at, chb).vectorize(x.r, k.vector, kTail);
  // query · x within the chunk, vectorized over tau: a per-chunk copy of x with tokens innermost.
  Func(in.x).in(rd.qx).compute_at(at, chb).reorder_storage(x.i, x.r).vectorize(x.i, k.vector, kTail);
  reduce_in_registers(rd.qx, x.tau, rd.r_qx.x, x.i, k).compute_at(at, chb);
  if (rd.qxd.defined()) rd.qxd.compute_at(at, chb).vectorize(x.tau, k.vector, kTail);
  reduce_in_registers(rd.inter.func(), x.m, rd.r_inter.x, x.i, k).compute_at(at, chb);
  reduce_in_registers(rd.intra.func(), x.m, rd.r_intra.x, x.i, k).compute_at(at, chb);
}

// Pass 2 of one chunk, everything at (at, chb).
void schedule_slot_read_cpu(SlotRead &rd, Func at, const Var &chb, const Knobs &k) {
  const Vars &x = vars();
  rd.out.compute_at(at, chb).vectorize(x.r, k.vector, kTail);
  rd.ud.func().compute_at(at, chb).vectorize(x.m, k.vector, kTail);
  if (rd.uw.func().defined()) rd.uw.func().compute_at(at, chb).vectorize(x.m, k.vector, kTail);
  reduce_in_registers(rd.inter, x.r, rd.r_inter.x, x.i, k).compute_at(at, chb);
  // e is indexed by tau or by the lag i - tau (scan.h): vectorized over whichever it is.
  reduce_in_registers(rd.e, rd.e.args()[0], rd.r_e.x, x.i, k).compute_at(at, chb);
  reduce_in_registers(rd.intra, x.r, rd.r_intra.x, x.i, k).compute_at(at, chb);
}

// The output o(r, h, t, b) computed one chunk of tokens at a time, parallel over
// chunk × batch × head; returns the fused parallel loop.
Var schedule_output_cpu(Func o, const Knobs &k) {
  const Vars &x = vars();
  Var bh("bh"), chb("chb"), tc("tc"), ti("ti");
  o.split(x.t, tc, ti, k.chunk, TailStrategy::GuardWithIf)
      .fuse(x.h, x.b, bh)
      .fuse(tc, bh, chb)
      .parallel(chb)
      .vectorize(x.r, k.vector, kTail);
  return chb;
}

}  // namespace

namespace {

// IDA's features, modes and pass 1 with the mixing, as the forward and the backward compute
// them. `keep_norms`: the per-token norms and silu(k) are stored for a backward pass.
void schedule_ida_pass1_cpu(IdaForwardStages &s, const Knobs &k, bool keep_norms) {
  const Vars &x = vars();
  Var bh("bh"), chb("chb");

  s.modes.decay_pow.func().compute_root();
  s.mix.gram64.func().compute_root().parallel(x.h);
  s.mix.gram64.func().update().parallel(x.h);
  s.mix.gram.func().compute_root();

  // Feature maps: once per token, stored chunked for both scans and both reads.
  for (Func f : {s.feat.fq, s.feat.kt, s.feat.vt}) {
    f.compute_root().fuse(x.h, x.b, bh).fuse(x.c, bh, chb).parallel(chb).vectorize(x.r, k.vector, kTail);
  }
  // Norms once per chunk (per token they cost a heap allocation each), over silu values
  // computed once per chunk, vectorized: inside the norm's scalar reduction, silu's exp was
  // scalar (the three feature maps were 16% of an IDA call).
  if (keep_norms) {
    for (Func f : {s.feat.q_act, s.feat.k_act}) {
      f.compute_root().fuse(x.h, x.b, bh).fuse(x.c, bh, chb).parallel(chb).vectorize(x.r, k.vector, kTail);
    }
    for (Func f : {s.feat.q_ssq, s.feat.k_ssq, s.feat.v_ssq}) {
      f.compute_root().parallel(x.b).parallel(x.h);
      f.update().parallel(x.b).parallel(x.h);
    }
    s.feat.k_msq.compute_root().parallel(x.b).parallel(x.h);
  } else {
    s.feat.q_act.compute_at(s.feat.fq, chb).vectorize(x.r, k.vector, kTail);
    s.feat.k_act.compute_at(s.feat.kt, chb).vectorize(x.r, k.vector, kTail);
    s.feat.q_ssq.compute_at(s.feat.fq, chb);
    s.feat.k_ssq.compute_at(s.feat.kt, chb);
    s.feat.v_ssq.compute_at(s.feat.vt, chb);
  }

  // Pass 1 and the mixing, one chunk at a time.
  Func p = s.p.out.func();
  p.compute_root().fuse(x.h, x.b, bh).fuse(x.c, bh, chb).parallel(chb).vectorize(x.m, k.vector, kTail);
  // The intra-chunk read walks the decay table along m: a copy with m innermost.
  s.modes.decay_pow.func()
      .in(s.p.intra.func())
      .compute_root()
      .reorder_storage(x.m, x.n)
      .vectorize(x.m, k.vector, kTail);
  schedule_channel_read_cpu(s.p, s.key_in, Func(), p, chb, k);

  Func w = s.mix.w.func();
  // Nested parallel loops, not one fused loop: inside a fused loop Halide bounds each of the
  // fused dimensions by its whole range, so every register tile of w was sized, allocated on
  // the heap and computed for all heads.
  reduce_in_registers(w, x.m, s.mix.r_w.x, x.i, k).compute_root().parallel(x.b).parallel(x.h).parallel(x.c);
}

// A scan's state read by slots where it is stored for reads by channels (or the reverse):
// a per-chunk copy with `vec` innermost, for the read stage `read`.
void transposed_state_copy(const ScanStages &s, Func read, const Var &vec, Func at, const Var &chb, const Knobs &k) {
  const Vars &x = vars();
  const Var &other = vec.same_as(x.m) ? x.r : x.m;
  Func(s.state.func()).in(read).compute_at(at, chb).reorder_storage(vec, other).vectorize(vec, k.vector, kTail);
}

}  // namespace

void schedule_ida_forward_cpu(IdaForwardStages &s, const Knobs &k) {
  const Vars &x = vars();
  Var bh("bh");
  schedule_ida_pass1_cpu(s, k, /*keep_norms=*/false);
  // Pass 1 reads the key state per slot (vector over m); pass 2 the value state per channel.
  schedule_scan_cpu(s.key_scan, s.key_in, x.m, k);
  schedule_scan_cpu(s.value_scan, s.value_in, x.r, k);

  // Pass 2, computed per chunk of the output.
  schedule_slot_read_cpu(s.o_read, s.o, schedule_output_cpu(s.o, k), k);

  for (Func f : {s.state_k_out, s.state_v_out}) {
    f.compute_root().fuse(x.h, x.b, bh).parallel(bh);
  }
}

namespace {

// BLA's write weights depend on the token only, not on batch or head: one table per call.
void schedule_bla_writes_cpu(BlaWrites &w, const Knobs &k) {
  const Vars &x = vars();
  w.gamma_pow.compute_root();
  w.slot_rotor.compute_root();
  w.token_rotor.compute_root();
  w.phi.compute_root().parallel(x.c).vectorize(x.m, k.vector, kTail);
}

// γ^lag as L×L tables: computed per use it was a gather per element (BLA forward: 1.3 ms of 29).
void schedule_decay_lag_cpu(Func decay_lag, const Knobs &k) {
  decay_lag.compute_root().vectorize(vars().tau, k.vector, kTail);
}

// A stage (m, i, c, h, b) computed for every token, one chunk at a time in parallel; returns
// the fused parallel loop.
Var per_chunk_root(Func f, const Knobs &k) {
  const Vars &x = vars();
  Var bh("bh"), chb("chb");
  f.compute_root().fuse(x.h, x.b, bh).fuse(x.c, bh, chb).parallel(chb).vectorize(x.m, k.vector, kTail);
  return chb;
}

// BLA's pass 1 (z) and softmax (π) of one chunk, at (at, chb).
void schedule_bla_pi_cpu(BlaForwardStages &s, Func at, const Var &chb, const Knobs &k) {
  const Vars &x = vars();
  s.z.out.func().compute_at(at, chb).vectorize(x.m, k.vector, kTail);
  schedule_channel_read_cpu(s.z, s.key_in, s.q, at, chb, k);
  s.softmax.zmax.compute_at(at, chb);
  s.softmax.ez.compute_at(at, chb).vectorize(x.m, k.vector, kTail);
  s.softmax.den.compute_at(at, chb);
}

// An output of BLA read by slots, u_i · (state at i), per chunk of tokens. e = u b over
// slots is vectorized over tokens: a per-chunk copy of the write weight b with tokens
// innermost (for the forward, b = φ; for the adjoints, dz or π).
// Returns the output's parallel loop over chunks.
Var schedule_bla_slot_output_cpu(Func out, SlotRead &rd, const ScanInputs &in, const Knobs &k) {
  const Vars &x = vars();
  Var ochb = schedule_output_cpu(out, k);
  Func(in.write.func()).in(rd.e).compute_at(out, ochb).reorder_storage(x.i, x.m).vectorize(x.i, k.vector, kTail);
  schedule_slot_read_cpu(rd, out, ochb, k);
  Func(in.x).in(rd.intra).compute_at(out, ochb).vectorize(x.r, k.vector, kTail);
  return ochb;
}

}  // namespace

void schedule_bla_forward_cpu(BlaForwardStages &s, const Knobs &k) {
  const Vars &x = vars();
  Var bh("bh");
  schedule_bla_writes_cpu(s.writes, k);
  schedule_decay_lag_cpu(s.z.decay_lag, k);
  schedule_decay_lag_cpu(s.o_read.decay_lag, k);

  schedule_scan_cpu(s.key_scan, s.key_in, x.m, k);
  schedule_scan_cpu(s.value_scan, s.value_in, x.r, k);
  Func pi = s.softmax.pi.func();
  schedule_bla_pi_cpu(s, pi, per_chunk_root(pi, k), k);
  schedule_bla_slot_output_cpu(s.o, s.o_read, s.value_in, k);

  for (Func f : {s.state_k_out, s.state_v_out}) {
    f.compute_root().fuse(x.h, x.b, bh).parallel(bh).vectorize(x.r, k.vector, kTail);
  }
}

void schedule_bla_backward_cpu(BlaBackwardStages &s, const Knobs &k) {
  const Vars &x = vars();
  Var bh("bh");
  BlaForwardStages &f = s.fwd;
  schedule_bla_writes_cpu(f.writes, k);
  for (Func lag : {f.z.decay_lag, s.dpi.decay_lag, s.dq_read.decay_lag, s.dk_read.decay_lag, s.dv_read.decay_lag}) {
    schedule_decay_lag_cpu(lag, k);
  }

  // Both forward states are read by channels (z, dπ): slots innermost. The adjoint states
  // are read by slots (dk, dv): channels innermost.
  schedule_scan_cpu(f.key_scan, f.key_in, x.m, k);
  schedule_scan_cpu(f.value_scan, f.value_in, x.m, k);
  schedule_scan_cpu(s.key_adj, s.key_adj_in, x.r, k);
  schedule_scan_cpu(s.value_adj, s.value_adj_in, x.r, k);

  // z and π, then dπ and dz, one chunk at a time, both pairs stored.
  const Var pi_chb = per_chunk_root(s.pi_z, k);
  f.softmax.pi.func().compute_at(s.pi_z, pi_chb).vectorize(x.m, k.vector, kTail);
  schedule_bla_pi_cpu(f, s.pi_z, pi_chb, k);
  const Var chb = per_chunk_root(s.dz_term, k);
  s.dpi.out.func().compute_at(s.dz_term, chb).vectorize(x.m, k.vector, kTail);
  schedule_channel_read_cpu(s.dpi, f.value_in, s.d_o, s.dz_term, chb, k);
  s.delta.compute_at(s.dz_term, chb);

  // dq reads the key state by slots, but it is stored for the reads by channels: a per-chunk
  // copy with channels innermost (read in place, the strided loads made dq's loop the
  // slowest of the backward: 13% of it, B=2 T=2048 H=4 D=S=64, 2-core AVX-512 Xeon).
  const Var dq_chb = schedule_bla_slot_output_cpu(s.dq, s.dq_read, f.key_in, k);
  transposed_state_copy(f.key_scan, s.dq_read.inter, x.r, s.dq, dq_chb, k);
  schedule_bla_slot_output_cpu(s.dk, s.dk_read, s.key_adj_in, k);
  schedule_bla_slot_output_cpu(s.dv, s.dv_read, s.value_adj_in, k);

  // The d log γ sums, vectorized over the slot or channel. Over tokens, the heads of a token
  // are adjacent in memory: they are the innermost loop but one, and the batch is the
  // parallel loop. Over chunk states, heads are far apart: parallel over batch × head.
  for (Func f : {s.slot_terms, s.k_terms, s.v_terms}) {
    const Var vec = f.args()[0];
    f.compute_root().parallel(x.b).vectorize(vec, k.vector, kTail);
    f.update().reorder(vec, x.h, s.r_tokens.x, s.r_tokens.y, x.b).parallel(x.b).vectorize(vec, k.vector, kTail);
  }
  for (Func f : {s.k_end_terms, s.v_end_terms}) {
    f.compute_root().fuse(x.h, x.b, bh).parallel(bh).vectorize(x.r, k.vector, kTail);
    f.update()
        .reorder(x.r, s.r_chunks.x, s.r_chunks.y, x.h, x.b)
        .fuse(x.h, x.b, bh)
        .parallel(bh)
        .vectorize(x.r, k.vector, kTail);
  }
  s.d_log_gamma.compute_root();
  for (Func out : {s.d_state_k_in, s.d_state_v_in}) {
    out.compute_root().fuse(x.h, x.b, bh).parallel(bh).vectorize(x.r, k.vector, kTail);
  }
}

void schedule_ida_backward_cpu(IdaBackwardStages &s, const Knobs &k) {
  const Vars &x = vars();
  Var bh("bh");
  IdaForwardStages &f = s.fwd;
  schedule_ida_pass1_cpu(f, k, /*keep_norms=*/true);
  // conj(Λ)^n for the adjoints, and copies of both tables with m innermost for the
  // intra-chunk reads by channels (g_w read in place walked Λ^n along m: 12 ms of a 94 ms
  // call, B=2 T=2048 H=4 D=M=64, 2-core AVX-512 Xeon).
  s.conj_decay.func().compute_root();
  for (Func read : {s.hk_read.intra.func(), s.hv_read.intra.func()}) {
    s.conj_decay.func().in(read).compute_root().reorder_storage(x.m, x.n).vectorize(x.m, k.vector, kTail);
  }
  f.modes.decay_pow.func()
      .in(s.gw_read.intra.func())
      .compute_root()
      .reorder_storage(x.m, x.n)
      .vectorize(x.m, k.vector, kTail);

  // The forward states are read by channels (p, g_w): modes innermost; the adjoint states by
  // slots (∂L/∂kt, ∂L/∂vt): channels innermost. The other reads take per-chunk transposed copies.
  schedule_scan_cpu(f.key_scan, f.key_in, x.m, k);
  schedule_scan_cpu(f.value_scan, f.value_in, x.m, k);
  schedule_scan_cpu(s.key_adj, s.key_adj_in, x.r, k);
  schedule_scan_cpu(s.value_adj, s.value_adj_in, x.r, k);

  // g_w per chunk, stored; then conj(g_p) = G gw as w is.
  Func gw = s.gw_read.out.func();
  const Var gw_chb = per_chunk_root(gw, k);
  schedule_channel_read_cpu(s.gw_read, f.value_in, s.d_o, gw, gw_chb, k);
  reduce_in_registers(s.w2.func(), x.m, s.r_w2.x, x.i, k).compute_root().parallel(x.b).parallel(x.h).parallel(x.c);

  // The adjoints' reads, per chunk, stored: by conj(B) (∂L/∂kt, ∂L/∂vt) and by kt, vt.
  for (auto [slot_read, channel_read, adj, adj_in] :
       {std::tuple(&s.dkt_read, &s.hk_read, &s.key_adj, &s.key_adj_in),
        std::tuple(&s.dvt_read, &s.hv_read, &s.value_adj, &s.value_adj_in)}) {
    Func stored = slot_read->out.in();
    Var bh2("bh"), chb("chb");
    stored.compute_root().fuse(x.h, x.b, bh2).fuse(x.c, bh2, chb).parallel(chb).vectorize(x.r, k.vector, kTail);
    schedule_slot_read_cpu(*slot_read, stored, chb, k);
    Func h = channel_read->out.func();
    const Var h_chb = per_chunk_root(h, k);
    schedule_channel_read_cpu(*channel_read, *adj_in, Func(), h, h_chb, k);
    transposed_state_copy(*adj, channel_read->inter.func(), x.m, h, h_chb, k);
  }

  // The gradients of q, k and v, per chunk of tokens.
  const Var dq_chb = schedule_output_cpu(s.dq, k);
  schedule_slot_read_cpu(s.dfq_read, s.dq, dq_chb, k);
  transposed_state_copy(f.key_scan, s.dfq_read.inter, x.r, s.dq, dq_chb, k);
  s.q_dot.compute_at(s.dq, dq_chb);
  const Var dk_chb = schedule_output_cpu(s.dk, k);
  s.k_dot.compute_at(s.dk, dk_chb);
  s.g_xk.compute_at(s.dk, dk_chb).vectorize(x.r, k.vector, kTail);
  s.k_xdot.compute_at(s.dk, dk_chb);
  const Var dv_chb = schedule_output_cpu(s.dv, k);
  s.v_dot.compute_at(s.dv, dv_chb);

  // Sums over the tokens, vectorized over the channel or mode, the heads of a token adjacent.
  for (Func f_sum : {s.d_gk, s.d_bk, s.d_gv, s.d_bv}) {
    f_sum.compute_root().parallel(x.b).vectorize(x.r, k.vector, kTail);
    f_sum.update().reorder(x.r, x.h, s.r_feature_tokens.x, x.b).parallel(x.b).vectorize(x.r, k.vector, kTail);
  }
  for (Func f_sum : {s.mode_terms.func(), s.d_b.func()}) {
    f_sum.compute_root().parallel(x.b).vectorize(x.m, k.vector, kTail);
    f_sum.update().reorder(x.m, x.h, s.r_tokens.x, s.r_tokens.y, x.b).parallel(x.b).vectorize(x.m, k.vector, kTail);
  }
  Func end = s.end_terms.func();
  end.compute_root().fuse(x.h, x.b, bh).parallel(bh).vectorize(x.m, k.vector, kTail);
  for (int u = 0; u < 2; ++u) {
    const RDom &r = u == 0 ? s.r_chunks_k : s.r_chunks_v;
    end.update(u).reorder(x.m, r.x, r.y, x.h, x.b).fuse(x.h, x.b, bh).parallel(bh).vectorize(x.m, k.vector, kTail);
  }
  s.d_dta.func().compute_root();
  reduce_in_registers(s.gram_grad.func(), x.m, s.r_gram.x, x.m2, k).compute_root().parallel(x.b).parallel(x.h);
  s.c_grad.func().compute_root().parallel(x.b).parallel(x.h).vectorize(x.m, k.vector, kTail);
  s.c_grad.func().update().parallel(x.b).parallel(x.h).vectorize(x.m, k.vector, kTail);
  for (Func out : {s.d_state_k_in, s.d_state_v_in}) out.compute_root().fuse(x.h, x.b, bh).parallel(bh);
}

namespace {

// A step's output o(r, h, t, b), parallel over batch × head, and its sum over modes or slots
// `sum`, for each head and sequence inside o's parallel loop (one loop over them, not two).
void schedule_step_output_cpu(Func o, Func sum, const Knobs &k) {
  const Vars &x = vars();
  Var bh("bh");
  o.compute_root().fuse(x.h, x.b, bh).parallel(bh).vectorize(x.r, k.vector, kTail);
  sum.compute_at(o, bh).vectorize(x.r, k.vector, kTail);
  sum.update().vectorize(x.r, k.vector, kTail);
}

}  // namespace

// Decoding steps: parallel over batch × head, vectorized over channels. A new state element
// is computed, both parts of a complex one, before it is stored, so the update may be in place.
void schedule_ida_step_cpu(IdaStepStages &s, const Knobs &k) {
  const Vars &x = vars();
  Var bh("bh"), ro("ro"), rv("rv");
  s.modes.decay_pow.func().compute_root();
  // The features, each norm once per head and sequence (inlined, every vector of a feature
  // summed its norm again).
  IdaFeatures &feat = s.feat;
  for (auto [feature, norm] :
       {std::pair(feat.fq, feat.q_ssq), std::pair(feat.kt, feat.k_ssq), std::pair(feat.vt, feat.v_ssq)}) {
    feature.compute_root().parallel(x.b).vectorize(x.r, k.vector, kTail);
    norm.compute_at(feature, x.h);
  }
  for (auto [next, out] : {std::pair(&s.key_new, &s.state_k_out), std::pair(&s.value_new, &s.state_v_out)}) {
    out->compute_root()
        .bound(x.ri, 0, 2)
        .split(x.r, ro, rv, k.vector, kTail)
        .reorder(rv, x.ri, ro, x.m, x.h, x.b)
        .unroll(x.ri)
        .vectorize(rv)
        .fuse(x.h, x.b, bh)
        .parallel(bh);
    next->func().in(*out).compute_at(*out, ro).vectorize(x.r, k.vector, kTail);
  }
  // p = Xk fq sums along each mode's row: vectors along the row (rfactor), then their lanes.
  // (Vectorized across modes, each lane read a row of its own.)
  Func p = s.p.func();
  Var lane("p_lane");
  RVar rpo("rpo"), rpi("rpi");
  Func part = p.update().split(s.r_p.x, rpo, rpi, k.vector, kTail).rfactor(rpi, lane);
  for (CxFunc *f : {&s.p, &s.cp, &s.w}) {
    f->func().compute_root().fuse(x.h, x.b, bh).parallel(bh).vectorize(x.m, k.vector, kTail);
    f->func().update().fuse(x.h, x.b, bh).parallel(bh).vectorize(x.m, k.vector, kTail);
  }
  part.compute_at(p, bh).vectorize(lane);
  part.update().reorder(lane, rpo, x.m, x.h, x.b).vectorize(lane);
  // The output's sum over modes runs in the value state update's loop over heads and
  // sequences (compute_with), just before that head's state is updated, which then reads it
  // again from the cache (and, in place, the sum reads the old values).
  for (Func f : {s.o, s.o_sum}) {
    f.compute_root().reorder(x.r, x.t, x.h, x.b).fuse(x.h, x.b, bh).parallel(bh).vectorize(x.r, k.vector, kTail);
  }
  s.o_sum.update().reorder(x.r, s.r_o.x, x.t, x.h, x.b).fuse(x.h, x.b, bh).parallel(bh).vectorize(x.r, k.vector, kTail);
  s.state_v_out.compute_with(s.o_sum.update(), bh);
}

void schedule_bla_step_cpu(BlaStepStages &s, const Knobs &k) {
  const Vars &x = vars();
  Var bh("bh");
  s.writes.gamma_pow.compute_root();
  s.writes.slot_rotor.compute_root();
  s.writes.token_rotor.compute_root();
  s.writes.phi.compute_root();
  for (Func out : {s.state_k_out, s.state_v_out}) {
    out.compute_root().fuse(x.h, x.b, bh).parallel(bh).vectorize(x.r, k.vector, kTail);
  }
  for (Func f : {s.z, s.ez}) f.compute_root().fuse(x.h, x.b, bh).parallel(bh).vectorize(x.m, k.vector, kTail);
  s.z.update().fuse(x.h, x.b, bh).parallel(bh).vectorize(x.m, k.vector, kTail);
  for (Func f : {s.zmax, s.den}) {
    f.compute_root().parallel(x.b);
    f.update().parallel(x.b);
  }
  schedule_step_output_cpu(s.o, s.o_sum, k);
}

void schedule_bla_interpolate_cpu(DirichletInterpolation &d, const Knobs &k) {
  const Vars &x = vars();
  Var bh("bh");
  d.slot_rotor.compute_root();
  d.point_rotor.compute_root();
  d.weight.compute_root();
  d.out.compute_root().fuse(x.h, x.b, bh).parallel(bh).vectorize(x.r, k.vector, kTail);
  d.out.update().fuse(x.h, x.b, bh).parallel(bh).vectorize(x.r, k.vector, kTail);
}

}  // namespace fsattn
