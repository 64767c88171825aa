#include "cpu.h"

using namespace Halide;

namespace fsattn {

namespace {

// Channel, slot and chunk extents are runtime values that may be smaller than a vector
// (Dk = 5, M = 3): vector loops guard their tails instead of shifting inwards, which would
// read before the start of small inputs.
constexpr TailStrategy kTail = TailStrategy::GuardWithIf;

// The scan's per-chunk carry (a small matmul per chunk) in parallel over chunks, then the
// serial pass over chunks, parallel across batch × head and vectorized across channels.
void schedule_scan_cpu(ScanStages &s, const CpuKnobs &k) {
  const Vars &x = vars();
  Var bh("bh"), chb("chb");
  s.coef.func().compute_root().parallel(x.h);
  Func carry = s.carry.func();
  carry.compute_root().fuse(x.h, x.b, bh).fuse(x.c, bh, chb).parallel(chb).vectorize(x.r, k.vector, kTail);
  carry.update().reorder(x.r, s.carry_tokens.x, x.m, x.c, x.h, x.b)
      .fuse(x.h, x.b, bh).fuse(x.c, bh, chb).parallel(chb).vectorize(x.r, k.vector, kTail);
  Func state = s.state.func();
  state.compute_root().fuse(x.h, x.b, bh).parallel(bh).vectorize(x.r, k.vector, kTail);
  state.update().reorder(x.r, x.m, s.chunks.x, x.h, x.b).fuse(x.h, x.b, bh).parallel(bh)
      .vectorize(x.r, k.vector, kTail);
}

}  // namespace

void schedule_ida_forward_cpu(IdaForwardStages &s, const CpuKnobs &k) {
  const Vars &x = vars();
  Var bh("bh"), chb("chb"), tc("tc"), ti("ti");

  s.modes.decay_pow.func().compute_root();
  s.mix.gram64.func().compute_root().parallel(x.h);
  s.mix.gram64.func().update().parallel(x.h);
  s.mix.gram.func().compute_root();

  // Feature maps: once per token, stored chunked for both scans and both reads.
  for (Func f : {s.feat.fq, s.feat.kt, s.feat.vt}) {
    f.compute_root().fuse(x.h, x.b, bh).fuse(x.c, bh, chb).parallel(chb).vectorize(x.r, k.vector, kTail);
  }
  // Norms once per chunk (per token they cost a heap allocation each: 1.5 ms of 95 ms).
  s.feat.q_ssq.compute_at(s.feat.fq, chb);
  s.feat.k_ssq.compute_at(s.feat.kt, chb);
  s.feat.v_msq.compute_at(s.feat.vt, chb);

  schedule_scan_cpu(s.key_scan, k);
  schedule_scan_cpu(s.value_scan, k);

  // Pass 1 and the mixing, one chunk at a time.
  Func p = s.p.out.func();
  p.compute_root().fuse(x.h, x.b, bh).fuse(x.c, bh, chb).parallel(chb).vectorize(x.m, k.vector, kTail);
  s.p.qx.compute_at(p, chb).vectorize(x.tau, k.vector, kTail);
  s.p.qx.update().reorder(x.tau, s.p.r_qx.x, x.i).vectorize(x.tau, k.vector, kTail);
  s.p.inter.func().compute_at(p, chb).vectorize(x.m, k.vector, kTail);
  s.p.inter.func().update().reorder(x.m, s.p.r_inter.x, x.i).vectorize(x.m, k.vector, kTail);
  s.p.intra.func().compute_at(p, chb).vectorize(x.m, k.vector, kTail);
  s.p.intra.func().update().reorder(x.m, s.p.r_intra.x, x.i).vectorize(x.m, k.vector, kTail);

  Func w = s.mix.w.func();
  w.compute_root().fuse(x.h, x.b, bh).fuse(x.c, bh, chb).parallel(chb).vectorize(x.m, k.vector, kTail);
  w.update().reorder(x.m, s.mix.r_w.x, x.i, x.c, x.h, x.b).fuse(x.h, x.b, bh).fuse(x.c, bh, chb)
      .parallel(chb).vectorize(x.m, k.vector, kTail);

  // Pass 2, computed per chunk of the output.
  Func o = s.o;
  o.split(x.t, tc, ti, k.chunk, TailStrategy::GuardWithIf).fuse(x.h, x.b, bh).fuse(tc, bh, chb)
      .parallel(chb).vectorize(x.r, k.vector, kTail);
  SlotRead &rd = s.o_read;
  rd.out.compute_at(o, chb).vectorize(x.r, k.vector, kTail);
  rd.ud.func().compute_at(o, chb).vectorize(x.m, k.vector, kTail);
  rd.uw.func().compute_at(o, chb).vectorize(x.m, k.vector, kTail);
  Func inter = rd.inter, e = rd.e, intra = rd.intra;
  inter.compute_at(o, chb).vectorize(x.r, k.vector, kTail);
  inter.update().reorder(x.r, rd.r_inter.x, x.i).vectorize(x.r, k.vector, kTail);
  e.compute_at(o, chb).vectorize(x.tau, k.vector, kTail);
  e.update().reorder(x.tau, rd.r_e.x, x.i).vectorize(x.tau, k.vector, kTail);
  intra.compute_at(o, chb).vectorize(x.r, k.vector, kTail);
  intra.update().reorder(x.r, rd.r_intra.x, x.i).vectorize(x.r, k.vector, kTail);

  for (Func f : {s.state_k_out, s.state_v_out}) {
    f.compute_root().fuse(x.h, x.b, bh).parallel(bh);
  }
}

}  // namespace fsattn
