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
Func reduce_in_registers(Func f, const Var &vec, const RVar &red, const Var &outer, const CpuKnobs &k) {
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
void schedule_scan_cpu(ScanStages &s, const ScanInputs &in, const Var &vec, const CpuKnobs &k) {
  const Vars &x = vars();
  const Var &other = vec.same_as(x.m) ? x.r : x.m;
  Var bh("bh"), chb("chb");
  s.coef.func().compute_root().parallel(x.h);
  if (vec.same_as(x.m)) s.coef.func().reorder_storage(x.m, x.i);

  Func state = s.state.func();
  // Each chunk's carry is computed inside the serial chunk loop, just before it is used:
  // stored for all chunks it was 16 MB of memory traffic per pass.
  Func carry = s.carry.func();
  const LoopLevel chunk_loop(state, s.chunks.x);
  reduce_in_registers(carry, vec, s.carry_tokens.x, other, k).compute_at(chunk_loop).reorder_storage(vec, other);
  // The chunk's written vectors, copied once: read in place, every broadcast of the carry's
  // inner loop paid for the bounds selects of `chunked`.
  Func(in.x).in(carry).compute_at(chunk_loop).vectorize(x.r, k.vector, kTail);

  state.compute_root().reorder_storage(vec, other);
  state.update(0).reorder(vec, other).fuse(x.h, x.b, bh).parallel(bh).vectorize(vec, k.vector, kTail);
  state.update(1).reorder(vec, other, s.chunks.x, x.h, x.b).fuse(x.h, x.b, bh).parallel(bh)
      .vectorize(vec, k.vector, kTail);
}

// Pass 1 of one chunk, everything at (at, chb): the chunk's query · x products, the read
// through the chunk's start state and the intra-chunk read.
void schedule_channel_read_cpu(ChannelRead &rd, const ScanInputs &in, Func at, const Var &chb,
                               const CpuKnobs &k) {
  const Vars &x = vars();
  // query · x within the chunk, vectorized over tau: a per-chunk copy of x with tokens innermost.
  Func(in.x).in(rd.qx).compute_at(at, chb).reorder_storage(x.i, x.r).vectorize(x.i, k.vector, kTail);
  reduce_in_registers(rd.qx, x.tau, rd.r_qx.x, x.i, k).compute_at(at, chb);
  if (rd.qxd.defined()) rd.qxd.compute_at(at, chb).vectorize(x.tau, k.vector, kTail);
  reduce_in_registers(rd.inter.func(), x.m, rd.r_inter.x, x.i, k).compute_at(at, chb);
  reduce_in_registers(rd.intra.func(), x.m, rd.r_intra.x, x.i, k).compute_at(at, chb);
}

// Pass 2 of one chunk, everything at (at, chb).
void schedule_slot_read_cpu(SlotRead &rd, Func at, const Var &chb, const CpuKnobs &k) {
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
Var schedule_output_cpu(Func o, const CpuKnobs &k) {
  const Vars &x = vars();
  Var bh("bh"), chb("chb"), tc("tc"), ti("ti");
  o.split(x.t, tc, ti, k.chunk, TailStrategy::GuardWithIf).fuse(x.h, x.b, bh).fuse(tc, bh, chb)
      .parallel(chb).vectorize(x.r, k.vector, kTail);
  return chb;
}

}  // namespace

void schedule_ida_forward_cpu(IdaForwardStages &s, const CpuKnobs &k) {
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
  s.feat.q_act.compute_at(s.feat.fq, chb).vectorize(x.r, k.vector, kTail);
  s.feat.k_act.compute_at(s.feat.kt, chb).vectorize(x.r, k.vector, kTail);
  s.feat.q_ssq.compute_at(s.feat.fq, chb);
  s.feat.k_ssq.compute_at(s.feat.kt, chb);
  s.feat.v_msq.compute_at(s.feat.vt, chb);

  // Pass 1 reads the key state per slot (vector over m); pass 2 the value state per channel.
  schedule_scan_cpu(s.key_scan, s.key_in, x.m, k);
  schedule_scan_cpu(s.value_scan, s.value_in, x.r, k);

  // Pass 1 and the mixing, one chunk at a time.
  Func p = s.p.out.func();
  p.compute_root().fuse(x.h, x.b, bh).fuse(x.c, bh, chb).parallel(chb).vectorize(x.m, k.vector, kTail);
  // The intra-chunk read walks the decay table along m: a copy with m innermost.
  s.modes.decay_pow.func().in(s.p.intra.func()).compute_root().reorder_storage(x.m, x.n)
      .vectorize(x.m, k.vector, kTail);
  schedule_channel_read_cpu(s.p, s.key_in, p, chb, k);

  Func w = s.mix.w.func();
  // Nested parallel loops, not one fused loop: inside a fused loop Halide bounds each of the
  // fused dimensions by its whole range, so every register tile of w was sized, allocated on
  // the heap and computed for all heads.
  reduce_in_registers(w, x.m, s.mix.r_w.x, x.i, k).compute_root().parallel(x.b).parallel(x.h).parallel(x.c);

  // Pass 2, computed per chunk of the output.
  schedule_slot_read_cpu(s.o_read, s.o, schedule_output_cpu(s.o, k), k);

  for (Func f : {s.state_k_out, s.state_v_out}) {
    f.compute_root().fuse(x.h, x.b, bh).parallel(bh);
  }
}

void schedule_bla_forward_cpu(BlaForwardStages &s, const CpuKnobs &k) {
  const Vars &x = vars();
  Var bh("bh"), chb("chb");

  // The write weights depend on the token only, not on batch or head: one table per call.
  s.writes.gamma_pow.compute_root();
  s.writes.slot_rotor.compute_root();
  s.writes.token_rotor.compute_root();
  s.writes.phi.compute_root().parallel(x.c).vectorize(x.m, k.vector, kTail);
  // γ^(i - tau) as L×L tables: computed per use it was a gather per element (1.3 ms of 29).
  s.z.decay_lag.compute_root().vectorize(x.tau, k.vector, kTail);
  s.o_read.decay_lag.compute_root().vectorize(x.tau, k.vector, kTail);

  schedule_scan_cpu(s.key_scan, s.key_in, x.m, k);
  schedule_scan_cpu(s.value_scan, s.value_in, x.r, k);

  // Pass 1 and the softmax, one chunk at a time.
  Func pi = s.softmax.pi.func();
  pi.compute_root().fuse(x.h, x.b, bh).fuse(x.c, bh, chb).parallel(chb).vectorize(x.m, k.vector, kTail);
  Func z = s.z.out.func();
  z.compute_at(pi, chb).vectorize(x.m, k.vector, kTail);
  // The chunk's queries, copied once for the reads that broadcast them (per use, every
  // broadcast paid for the bounds selects of `chunked`).
  s.q.compute_at(pi, chb).vectorize(x.r, k.vector, kTail);
  schedule_channel_read_cpu(s.z, s.key_in, pi, chb, k);
  s.softmax.zmax.compute_at(pi, chb);
  s.softmax.ez.compute_at(pi, chb).vectorize(x.m, k.vector, kTail);
  s.softmax.den.compute_at(pi, chb);

  // Pass 2 forms e = π φ over slots, vectorized over tokens: a per-chunk copy of φ with
  // tokens innermost.
  Var ochb = schedule_output_cpu(s.o, k);
  s.writes.write.func().in(s.o_read.e).compute_at(s.o, ochb).reorder_storage(x.i, x.m)
      .vectorize(x.i, k.vector, kTail);
  schedule_slot_read_cpu(s.o_read, s.o, ochb, k);
  s.v.in(s.o_read.intra).compute_at(s.o, ochb).vectorize(x.r, k.vector, kTail);

  for (Func f : {s.state_k_out, s.state_v_out}) {
    f.compute_root().fuse(x.h, x.b, bh).parallel(bh).vectorize(x.r, k.vector, kTail);
  }
}

void schedule_bla_interpolate_cpu(DirichletInterpolation &d, const CpuKnobs &k) {
  const Vars &x = vars();
  Var bh("bh");
  d.slot_rotor.compute_root();
  d.point_rotor.compute_root();
  d.weight.compute_root();
  d.out.compute_root().fuse(x.h, x.b, bh).parallel(bh).vectorize(x.r, k.vector, kTail);
  d.out.update().fuse(x.h, x.b, bh).parallel(bh).vectorize(x.r, k.vector, kTail);
}

}  // namespace fsattn
