// The CUDA schedules of the chunked passes (IDA and BLA, forward and backward), BLA's
// interpolation and the varlen backward's gradient sums. Every stage becomes a kernel by
// schedule_pipeline_cuda; these choose which stages are stored, fused or tiled otherwise. The
// measurements behind each choice are in docs/performance-log.md (CUDA schedule decisions).
#include "internal.h"

#include "schedules/register_budget.h"

using namespace Halide;

namespace fsattn::cuda_schedule {

namespace {

// IDA's decay tables Λ_m^n (n, m, h), their rows of L + 1 powers padded to a multiple of 4
// floats, so that the reads at each pair's lag are aligned vectors.
void aligned_decay_rows(std::initializer_list<CxFunc *> tables) {
  for (CxFunc *t : tables) t->func().align_bounds(vars().n, kReductionStep);
}

// A scan's chunk states and carries stored mode-major, for a reader that tiles along modes
// and sums over channels (the forwards' key read through the state): its operand then lies
// along the tile, read as vectors (vector_tile_reduction), a warp one row a step.
void mode_major(ScanStages &scan, bool carry_stored = true) {
  const Vars &x = vars();
  scan.state.func().reorder_storage(x.m, x.r, x.c, x.h, x.b);
  if (carry_stored) scan.carry.func().in().reorder_storage(x.m, x.r, x.c, x.h, x.b);
}

// A chunked scan's carries formed inside its serial update instead of stored by a kernel of
// their own: a block per 32 × 32 patch of the state (kScanThreads × kScanThreads threads, each
// a kScanTile × kScanTile tile) and head and batch element runs the chunks in order, copies
// each chunk's written vectors and carry weights into shared memory, sums its tile of the
// carry in registers and writes its tile of the next state as float4 rows. The carry's token
// loop is unrolled kScanTokenUnroll times to keep shared loads in flight (few warps per SM).
// BLA's forward keeps its stored carries (slower fused).
constexpr int kScanTile = 4, kScanThreads = 8, kScanTokenUnroll = 4;
bool fuses_scans(const Knobs &k) { return k.gpu_tile >= kScanTile; }
void gpu_fused_scan(ScanStages &scan, const Knobs &k, std::set<std::string> &done) {
  const Vars &v = vars();
  Func state = scan.state.func(), carry = scan.carry.func();
  const std::string p = state.name() + "_fused";
  state.compute_root();
  gpu_stage(state.update(0), in_storage_order(state, pure_vars(state, 0)), k.threads, state.name() + "_s1");
  const bool m_major = contiguous_dim(state) == 1;
  const Var x = m_major ? v.m : v.r, y = m_major ? v.r : v.m;
  const int R = kScanTile, TX = kScanThreads, TY = kScanThreads;
  Var xo(p + "_xo"), xi(p + "_xi"), yo(p + "_yo"), yi(p + "_yi"), tx(p + "_tx"), ty(p + "_ty"), rx(p + "_rx"),
      ry(p + "_ry"), patch(p + "_patch"), batch(p + "_b_" + kWideKernel);  // (the kernel's name: its budget)
  const RVar chunk = loop_rvars(state, 1)[0];
  state.align_bounds(x, TX * R);
  state.update(1)
      .split(x, xo, xi, TX * R, TailStrategy::RoundUp)
      .split(y, yo, yi, TY * R, TailStrategy::GuardWithIf)
      .split(xi, tx, rx, R)
      .split(yi, ty, ry, R)
      .reorder(rx, ry, tx, ty, chunk, xo, yo, v.h, v.b)
      .fuse(xo, yo, patch)
      .rename(v.b, batch)
      .gpu_blocks(patch, v.h, batch)
      .gpu_threads(tx, ty)
      .unroll(ry)
      .vectorize(rx);
  // The carry's tile in registers, its tokens' loop outermost.
  carry.compute_at(state, tx).store_in(MemoryType::Register);
  for (const Var &a : carry.args()) {
    carry.bound_extent(a, a.same_as(v.r) || a.same_as(v.m) ? R : 1);
  }
  carry.unroll(v.r).unroll(v.m);
  const std::vector<RVar> tokens = loop_rvars(carry, 0);
  std::vector<VarOrRVar> order{v.r, v.m};
  order.insert(order.end(), tokens.begin(), tokens.end());
  for (size_t j = 2; j < carry.args().size(); ++j) order.push_back(carry.args()[j]);
  carry.update(0).reorder(order).unroll(v.r).unroll(v.m).unroll(tokens[0], kScanTokenUnroll);
  // Its operands copied per chunk into shared memory, the tile's dimension contiguous, each
  // copy a whole patch (also past the state's end, which reads zeros or clamped parameters) so
  // that its loops have constant extents and are unrolled.
  for (const auto &[name, fn] : Internal::find_direct_calls(carry.function())) {
    if (name == carry.name()) continue;
    Func copy = Func(fn).in(carry);
    const std::vector<Var> a = copy.args();
    copy.compute_at(state, chunk).store_in(MemoryType::GPUShared);
    if (a[0].same_as(v.i) && a.size() > 1) copy.reorder_storage(a[1], a[0]);
    auto extent = [&](const Var &d) { return d.same_as(v.i) ? k.chunk : d.same_as(x) ? TX * R : TY * R; };
    Var ao(copy.name() + "_ao"), ai(copy.name() + "_ai"), bo(copy.name() + "_bo"), bi(copy.name() + "_bi");
    copy.bound_extent(a[0], extent(a[0]))
        .bound_extent(a[1], extent(a[1]))
        .split(a[0], ao, ai, TX, TailStrategy::RoundUp)
        .split(a[1], bo, bi, TY, TailStrategy::RoundUp)
        .reorder(ao, bo, ai, bi)
        .gpu_threads(ai, bi)
        .unroll(ao)
        .unroll(bo);
    done.insert(copy.name());
  }
  done.insert(state.name());
  done.insert(carry.name());
}

// The scans fused where the variant's tiles are (fuses_scans); returns their states' names
// (stored, for the register tiles that read them).
std::set<std::string> fused_scans(std::initializer_list<ScanStages *> scans, const Knobs &k,
                                  std::set<std::string> &done) {
  std::set<std::string> states;
  if (!fuses_scans(k)) return states;
  for (ScanStages *scan : scans) {
    gpu_fused_scan(*scan, k, done);
    states.insert(scan->state.func().name());
  }
  return states;
}

// A backward pass: its gradient outputs and the generator's batch-summed parameter gradients
// (the stages in `scheduled` were scheduled by the caller).
void schedule_backward_cuda(std::vector<Func> outputs, const std::vector<Func> &sums,
                            const std::set<std::string> &scheduled, const std::set<std::string> &stored, const Knobs &k,
                            const TileLists &tiles, const StageSet &views) {
  outputs.insert(outputs.end(), sums.begin(), sums.end());
  schedule_pipeline_cuda(outputs, views, k, scheduled, stored, tiles);
}

// The views every chunked pass inlines: the inputs' own Funcs and their boundary conditions,
// and the scans' entering states as complex or real values. The inputs viewed chunk by chunk
// are copied instead (contiguous and zero-padded, they spare the register tiles' loads their
// clamps), except in the IDA forward, whose features read them once each.
StageSet pass_views(std::initializer_list<const ScanInputs *> scans) {
  StageSet views;
  views.inputs().boundary_conditions();
  for (const ScanInputs *in : scans) views.add({in->init.func()});
  return views;
}

// IDA's features' pointwise parts (silu, mean squares) and its write weight B.
StageSet ida_feature_views(const IdaFeatures &f, const IdaModes &modes) {
  return StageSet{f.q_act, f.k_act, f.k_msq, f.v_msq, modes.write.func()};
}

// A read by slots' weights (u b, u λ), which its products form where they read them.
StageSet slot_weights(std::initializer_list<const SlotRead *> reads, bool with_uw) {
  StageSet views;
  for (const SlotRead *r : reads) {
    views.add({r->ud.func()});
    if (with_uw) views.add({r->uw.func()});
  }
  return views;
}

// BLA's per-head decay read through a lag, and the lagged products of a read by channels.
StageSet bla_lag_views(std::initializer_list<const ChannelRead *> channel_reads,
                       std::initializer_list<const SlotRead *> slot_reads) {
  StageSet views;
  for (const ChannelRead *r : channel_reads) views.add({r->decay_lag, r->qxd});
  for (const SlotRead *r : slot_reads) views.add({r->decay_lag});
  return views;
}

// The large tiles (gpu_tiled_reduction): the reads through the chunk states and the query's
// reads of the states; BLA's products with π and its backward's adjoint carries. IDA's
// products with Λ and BLA's forward carries lose as large tiles.
// The IDA forward's tiles kept at 64 registers (its read through the mode-major key state
// and the carries, whose operands are copied into registers: they lose occupancy with more),
// and those that copy their complex operands (the read within the chunk, the mixing).
TileLists ida_forward_tiles(const IdaForwardStages &s) {
  return {StageSet{s.p.inter.func(), s.key_scan.carry.func(), s.value_scan.carry.func()},
          StageSet{s.p.inter.func(), s.p.qx, s.o_read.inter}, StageSet{s.p.intra.func(), s.mix.w.func()}};
}

// IDA's backward: the carries narrow; its reads through the channel-major chunk states, its
// reads within the chunk and its mixings copy their complex operands.
TileLists ida_backward_tiles(const IdaBackwardStages &s) {
  const IdaForwardStages &f = s.fwd;
  return {
      StageSet{f.key_scan.carry.func(), f.value_scan.carry.func(), s.key_adj.carry.func(), s.value_adj.carry.func()},
      StageSet{f.p.inter.func(), f.p.qx, s.gw_read.inter.func(), s.gw_read.qx, s.hk_read.inter.func(), s.hk_read.qx,
               s.hv_read.inter.func(), s.hv_read.qx, s.dfq_read.inter, s.dkt_read.inter, s.dvt_read.inter},
      StageSet{s.hk_read.inter.func(), s.hv_read.inter.func(), s.gw_read.inter.func(), f.p.inter.func(),
               f.p.intra.func(), s.gw_read.intra.func(), f.mix.w.func(), s.w2.func()}};
}

TileLists bla_forward_tiles(const BlaForwardStages &s) {
  return {{}, StageSet{s.z.inter.func(), s.z.qx, s.o_read.inter, s.o_read.e}, {}};
}

TileLists bla_backward_tiles(const BlaBackwardStages &s) {
  return {{},
          StageSet{s.fwd.z.inter.func(), s.fwd.z.qx, s.dpi.inter.func(), s.dpi.qx, s.dq_read.inter, s.dq_read.e,
                   s.dk_read.inter, s.dk_read.e, s.dv_read.inter, s.dv_read.e, s.key_adj.carry.func(),
                   s.value_adj.carry.func()},
          {}};
}

}  // namespace

}  // namespace fsattn::cuda_schedule

namespace fsattn {

using namespace cuda_schedule;

void schedule_ida_forward_cuda(IdaForwardStages &s, const Knobs &k) {
  // The feature maps are stored, each with its norm (gpu_chunk_rows), so the chunked inputs
  // are read once each; the value read's sum of its two parts is formed where o is written.
  std::set<std::string> done;
  IdaFeatures &f = s.feat;
  gpu_chunk_rows(f.fq, {f.q_ssq}, f.q_act, {f.q_ssq, f.fq}, k, done);
  gpu_chunk_rows(f.kt, {f.k_ssq}, f.k_act, {f.k_ssq, f.kt}, k, done);
  gpu_chunk_rows(f.vt, {f.v_ssq}, f.v, {f.v_ssq, f.vt}, k, done);
  aligned_decay_rows({&s.modes.decay_pow});
  mode_major(s.key_scan, !fuses_scans(k));
  const std::set<std::string> states = fused_scans({&s.key_scan, &s.value_scan}, k, done);
  std::set<std::string> stored{f.fq.name(), f.kt.name(), f.vt.name()};
  stored.insert(states.begin(), states.end());
  StageSet views = pass_views({&s.key_in, &s.value_in});
  views.add(ida_feature_views(f, s.modes)).add({f.q, f.k, f.v, s.o_read.out}).add(slot_weights({&s.o_read}, true));
  schedule_pipeline_cuda({s.o, s.state_k_out, s.state_v_out}, views, k, done, stored, ida_forward_tiles(s));
}

void schedule_ida_backward_cuda(IdaBackwardStages &s, const std::vector<Func> &sums, const Knobs &k) {
  aligned_decay_rows({&s.fwd.modes.decay_pow, &s.conj_decay});
  tiled_partial_sums(s.gram_grad.func());
  std::set<std::string> done;
  partial_sums(s.end_terms.func(), true, k, done);
  for (Func f : {s.mode_terms.func(), s.d_b.func(), s.d_gk, s.d_bk, s.d_gv, s.d_bv}) partial_sums(f, false, k, done);
  const std::set<std::string> states =
      fused_scans({&s.fwd.key_scan, &s.fwd.value_scan, &s.key_adj, &s.value_adj}, k, done);
  // (d_a_im, pointwise, is inlined into its sum over the batch.)
  StageSet views = pass_views({&s.fwd.key_in, &s.fwd.value_in});
  views.add(ida_feature_views(s.fwd.feat, s.fwd.modes))
      .add(slot_weights({&s.dfq_read, &s.dkt_read, &s.dvt_read}, true));
  views.add({s.d_a_im});
  schedule_backward_cuda({s.dq, s.dk, s.dv, s.d_state_k_in, s.d_state_v_in}, sums, done, states, k,
                         ida_backward_tiles(s), views);
}

void schedule_bla_forward_cuda(BlaForwardStages &s, const Knobs &k) {
  // The reads' sums of their parts (z and o) are formed where they are used; the softmax is
  // one kernel (gpu_chunk_rows), its exponentials formed where they are used.
  std::set<std::string> done;
  BlaSoftmax &sm = s.softmax;
  gpu_chunk_rows(sm.pi.func(), {sm.zmax, sm.den}, s.z.out.func(), {sm.zmax, sm.ez}, k, done);
  mode_major(s.key_scan);  // (its carries stored: see gpu_fused_scan)
  StageSet views = pass_views({&s.key_in, &s.value_in});
  views.add({s.writes.decay_pow.func(), s.writes.write.func(), sm.ez, s.z.out.func(), s.o_read.out});
  views.add(slot_weights({&s.o_read}, false)).add(bla_lag_views({&s.z}, {&s.o_read}));
  schedule_pipeline_cuda({s.o, s.state_k_out, s.state_v_out}, views, k, done, {sm.pi.func().name()},
                         bla_forward_tiles(s));
}

void schedule_bla_backward_cuda(BlaBackwardStages &s, const std::vector<Func> &sums, const Knobs &k) {
  std::set<std::string> done;
  for (Func f : {s.k_terms, s.v_terms, s.k_end_terms, s.v_end_terms, s.slot_terms}) partial_sums(f, false, k, done);
  // The adjoint scans' carry weights are formed inside their carries' register tiles, which
  // read dz and π as vectors (stored, each was a thread-per-element kernel at 0.8 TB/s).
  const std::set<std::string> states =
      fused_scans({&s.fwd.key_scan, &s.fwd.value_scan, &s.key_adj, &s.value_adj}, k, done);
  StageSet views = pass_views({&s.fwd.key_in, &s.fwd.value_in});
  views.add({s.fwd.writes.decay_pow.func(), s.fwd.writes.write.func(), s.key_adj.coef.func(), s.value_adj.coef.func()});
  views.add(slot_weights({&s.dq_read, &s.dk_read, &s.dv_read}, false));
  views.add(bla_lag_views({&s.fwd.z, &s.dpi}, {&s.dq_read, &s.dk_read, &s.dv_read}));
  schedule_backward_cuda({s.dq, s.dk, s.dv, s.d_state_k_in, s.d_state_v_in}, sums, done, states, k,
                         bla_backward_tiles(s), views);
}

void schedule_bla_interpolate_cuda(DirichletInterpolation &d, const Knobs &k) {
  schedule_pipeline_cuda({d.out}, StageSet().inputs(), k);
}

void schedule_gradient_sum_cuda(Func sum, const Knobs &k) { schedule_pipeline_cuda({sum}, {}, k); }

}  // namespace fsattn
