// The CUDA schedules of the decoding steps as a few kernels. A step is bound by its states,
// each read and written once at best, and by its launches (a few µs each), so each state is one
// kernel that reads the old state, reduces it with the token's query and writes the new one,
// fused with compute_with: the key state's kernel sums each mode's row in kStepLanes partial
// sums along the channels; the value state's kernel, with the output, sums over modes (IDA in
// kValueGroups partial sums). Each thread reads the elements it writes before writing them, so
// the update may be in place. The features, norms and mixing are small kernels. The whole step
// as one kernel is the other variant (fused_steps.cpp). The measurements behind each choice
// are in docs/performance-log.md (CUDA schedule decisions).
#include "internal.h"

#include <algorithm>

using namespace Halide;

namespace fsattn::cuda_schedule {

namespace {

// Partial sums of a key state's read per mode: 16 modes × 8 channels make a block of 128
// threads, each reading Dk/8 values of one row (4 or 16 were slower).
constexpr int kStepLanes = 8;

// f(v, ...) (a per-token vector: a feature map, a read of the state, φ) as one kernel:
// blocks over 64 values of v and over the head and sequence, one value per thread; f's token
// dimensions (extent 1) loop inside the thread. Not one fused thread index: Halide bounds a
// thread's reads through the divisions by their whole ranges. Returns the thread loop.
Var step_block(const Func &f) { return Var(f.args()[0].name() + "_o"); }  // f's blocks along v
int step_threads(const Knobs &k) { return std::min(64, k.threads); }      // along v, per block
Var gpu_step_kernel(Func f, const Knobs &k) {
  const Vars &x = vars();
  const std::vector<Var> a = f.args();
  Var vo = step_block(f), vi(a[0].name() + "_i");
  std::vector<VarOrRVar> order{vi}, blocks{vo};
  for (size_t j = 1; j < a.size(); ++j) {
    if (a[j].same_as(x.h) || a[j].same_as(x.b)) {
      blocks.push_back(a[j]);
    } else {
      f.bound(a[j], 0, 1);
      order.insert(order.begin(), a[j]);
    }
  }
  f.compute_root().split(a[0], vo, vi, step_threads(k), TailStrategy::GuardWithIf);
  order.insert(order.end(), blocks.begin(), blocks.end());
  f.reorder(order).gpu_threads(vi);
  gpu_grid(f, blocks);
  return vi;
}

// g, which a step kernel f (gpu_step_kernel) reads, formed once per block of f into shared
// memory, its first dimension across the block's threads. Returns g's thread loop.
Var gpu_step_block_copy(Func g, const Func &f, const Knobs &k) {
  Var so("so"), si("si");
  g.compute_at(f, step_block(f))
      .store_in(MemoryType::GPUShared)
      .split(g.args()[0], so, si, step_threads(k), TailStrategy::GuardWithIf)
      .gpu_threads(si);
  return si;
}

// A reduction f(v, h, b) read by a step kernel `reader`, formed once per block of it into
// shared memory, each thread summing one element in a register (reader reads the copy).
void gpu_step_block_sum(Func f, const Func &reader, const Knobs &k, std::set<std::string> &done) {
  Func rows = f.in();
  in_registers(f, rows, gpu_step_block_copy(rows, reader, k));
  done.insert({rows.name(), f.name()});
}

// A reduction f(v, h, b) stored by a wrapper, one kernel: each thread one element, summed in
// a register. f's consumers read the wrapper, which is returned.
Func gpu_step_sum(Func f, const Knobs &k, std::set<std::string> &done) {
  Func stored = f.in();
  in_registers(f, stored, gpu_step_kernel(stored, k));
  done.insert(stored.name());
  done.insert(f.name());
  return stored;
}

}  // namespace

// state.in(user) in registers at `at`: one element's (re, im) pair, loaded as one vector
// (the generator states the strides and alignment that make it one). A read's pair copies are
// bounded by the sums' whole lanes, so `state` must then be a view clamped to the state.
void pair_copy(Func state, const Func &user, const LoopLevel &at, std::set<std::string> &done) {
  Func pair = state.in(user);
  pair.compute_at(at).store_in(MemoryType::Register);
  const std::vector<Var> a = pair.args();
  pair.bound(a[0], 0, 2).vectorize(a[0]);
  for (size_t j = 1; j < a.size(); ++j) pair.bound_extent(a[j], 1);
  done.insert(pair.name());
}

namespace {

// The key state's kernel: `out` (ri, r, m, h, b) or (r, m, h, b), and the read f(m, h, b)
// summing over channels r, split into kStepLanes partial sums (channels kStepLanes apart)
// by rfactor. Blocks of 16 modes of one head and sequence; f, which adds the partial sums,
// is the caller's to schedule.
void gpu_key_state(Func out, const StatePairs &pairs, Func f, const Knobs &k, std::set<std::string> &done) {
  const Vars &x = vars();
  const bool complex = pairs.complex();
  const int nm = std::max(1, k.threads / kStepLanes);
  RVar rj("rj"), rl("rl");
  Var u("u"), mo("mo"), mi("mi");
  Func partial = f.update(0).split(f.rvars(0)[0], rj, rl, kStepLanes, TailStrategy::GuardWithIf).rfactor(rl, u);
  Func lanes = partial.in(f);
  lanes.compute_root()
      .bound(u, 0, kStepLanes)
      .split(x.m, mo, mi, nm, TailStrategy::GuardWithIf)
      .reorder(u, mi, mo, x.h, x.b)
      .gpu_blocks(mo, x.h, x.b)
      .gpu_threads(u, mi);
  in_registers(partial, lanes, u, true, complex ? kPairUnroll : kStepUnroll);
  if (pairs.read.defined()) pair_copy(pairs.state, pairs.read, LoopLevel(partial, unrolled(partial.rvars(0)[0])), done);
  // (compute_with needs the fused loops to have the same names in both.)
  Var rs("rs");
  out.compute_root();
  if (complex) out.bound(x.ri, 0, 2);
  out.split(x.r, rs, u, kStepLanes, TailStrategy::GuardWithIf).split(x.m, mo, mi, nm, TailStrategy::GuardWithIf);
  if (complex) {
    out.reorder(x.ri, rs, u, mi, mo, x.h, x.b).vectorize(x.ri);
    unroll_serial(out, rs, kPairUnroll);
    pair_copy(pairs.state, pairs.write, LoopLevel(out, unrolled(rs)), done);
  } else {
    out.reorder(rs, u, mi, mo, x.h, x.b);
    unroll_serial(out, rs);
  }
  out.gpu_blocks(mo, x.h, x.b).gpu_threads(u, mi).compute_with(lanes, u);
  done.insert({out.name(), partial.name(), lanes.name()});
}

// The value state's kernel with the output: `out` (ri, r, m, h, b) or (r, m, h, b), and the
// output o(r, h, t, b), whose sum over modes (slots) is `in_thread` (with the softmax's sums
// for BLA), their loops unrolled; one thread per channel, over every mode. Blocks of 64
// channels of one head and sequence.
void gpu_value_state_whole(Func out, bool complex, Func o, const std::vector<Func> &in_thread, const Knobs &k,
                           std::set<std::string> &done) {
  const Vars &x = vars();
  const int nr = step_threads(k);
  Var ro("ro"), rv("rv");
  // (The token loop, of extent 1, innermost: compute_with needs the fused loops to be the
  // same, by name, in both.)
  o.compute_root()
      .bound(x.t, 0, 1)
      .split(x.r, ro, rv, nr, TailStrategy::GuardWithIf)
      .reorder(x.t, rv, ro, x.h, x.b)
      .gpu_blocks(ro, x.h, x.b)
      .gpu_threads(rv);
  for (Func g : in_thread) in_registers(g, o, rv);
  out.compute_root();
  if (complex) out.bound(x.ri, 0, 2);
  out.split(x.r, ro, rv, nr, TailStrategy::GuardWithIf);
  if (complex) {
    out.reorder(x.ri, x.m, rv, ro, x.h, x.b).unroll(x.ri);
  } else {
    out.reorder(x.m, rv, ro, x.h, x.b);
  }
  unroll_serial(out, x.m);
  out.gpu_blocks(ro, x.h, x.b).gpu_threads(rv).compute_with(o, rv);
  done.insert({out.name(), o.name()});
  for (const Func &g : in_thread) done.insert(g.name());
}

// Partial sums of the value state's read per channel, over groups of modes kValueGroups
// apart, in blocks of kValueChannels channels × kValueGroups groups: at B·H·Dv threads one per
// channel fills half the GPU at B=64 H=32. BLA keeps gpu_value_state_whole (its threads would
// each form the softmax's maximum first).
constexpr int kValueChannels = 32;

// The value state's kernel as partial sums: `out` (ri, r, m, h, b) or (r, m, h, b), and the
// partial sums of f(r, h, t, b), the output's sum over modes, split by rfactor; each thread
// writes the new elements it has just read. The output o is a small kernel of its own that
// adds the partial sums.
void gpu_value_state_partials(Func out, const StatePairs &pairs, Func o, Func f, const Knobs &k,
                              std::set<std::string> &done) {
  const Vars &x = vars();
  const bool complex = pairs.complex();
  RVar rj("rj"), rl("rl");
  Var u("u"), ro("ro"), rv("rv"), ms("ms");
  Func partial = f.update(0).split(f.rvars(0)[0], rj, rl, kValueGroups, TailStrategy::GuardWithIf).rfactor(rl, u);
  Func lanes = partial.in(f);
  // (The token loop, of extent 1, innermost: compute_with needs the fused loops to be the
  // same, by name, in both.)
  lanes.compute_root()
      .bound(u, 0, kValueGroups)
      .bound(x.t, 0, 1)
      .split(x.r, ro, rv, kValueChannels, TailStrategy::GuardWithIf)
      .reorder(x.t, rv, u, ro, x.h, x.b)
      .gpu_blocks(ro, x.h, x.b)
      .gpu_threads(rv, u);
  in_registers(partial, lanes, rv, complex, kPairUnroll);
  out.compute_root();
  out.split(x.r, ro, rv, kValueChannels, TailStrategy::GuardWithIf)
      .split(x.m, ms, u, kValueGroups, TailStrategy::GuardWithIf);
  if (complex) {
    out.bound(x.ri, 0, 2).reorder(x.ri, ms, rv, u, ro, x.h, x.b).vectorize(x.ri);
    unroll_serial(out, ms, kPairUnroll);
    pair_copy(pairs.state, pairs.write, LoopLevel(out, unrolled(ms)), done);
  } else {
    out.reorder(ms, rv, u, ro, x.h, x.b);
  }
  out.gpu_blocks(ro, x.h, x.b).gpu_threads(rv, u).compute_with(lanes, rv);
  in_registers(f, o, gpu_step_kernel(o, k));
  done.insert({out.name(), o.name(), f.name(), partial.name(), lanes.name()});
}

// A feature map f(r, ...) as one kernel (gpu_step_kernel) and its norm `norm`, which every
// thread sums over the token's channels; `x`, what the norm sums over, is formed once per
// block into shared memory (not by every thread).
void gpu_step_feature(Func f, Func norm, Func x, const Knobs &k, std::set<std::string> &done) {
  const Var thread = gpu_step_kernel(f, k);
  done.insert(f.name());
  done.insert(in_registers(norm, f, thread).name());
  Func staged = x.in(norm);
  gpu_step_block_copy(staged, f, k);
  done.insert(staged.name());
}

}  // namespace

// The steps' pointwise views, formed where they are used: the inputs (and their clamped
// views), the features' chunked inputs and pointwise parts, the new states, and BLA's decay
// and Dirichlet rotors.
StageSet step_views(const IdaStepStages &s) {
  const IdaFeatures &f = s.feat;
  return StageSet{f.q,
                  f.k,
                  f.v,
                  f.q_act,
                  f.k_act,
                  f.k_msq,
                  f.v_msq,
                  s.modes.write.func(),
                  s.state_k_in,
                  s.state_v_in,
                  s.key_new.func(),
                  s.value_new.func(),
                  s.key_read.func(),
                  s.value_read.func()}
      .inputs();
}

StageSet step_views(const BlaStepStages &s) {
  return StageSet{s.writes.slot_rotor, s.writes.gamma_pow, s.writes.token_rotor, s.key_new, s.value_new, s.v,
                  s.state_v_in}
      .inputs();
}

}  // namespace fsattn::cuda_schedule

namespace fsattn {

using namespace cuda_schedule;

void schedule_ida_step_cuda(IdaStepStages &s, const Knobs &k) {
  if (k.fused) {
    schedule_ida_step_cuda_fused(s, k);
    return;
  }
  std::set<std::string> done;
  gpu_step_feature(s.feat.fq, s.feat.q_ssq, s.feat.q_act, k, done);
  gpu_step_feature(s.feat.kt, s.feat.k_ssq, s.feat.k_act, k, done);
  gpu_step_feature(s.feat.vt, s.feat.v_ssq, s.feat.v, k, done);
  // The three features as one kernel: their blocks' loops fused, so two launches fewer.
  s.feat.kt.compute_with(s.feat.fq, step_block(s.feat.fq));
  s.feat.vt.compute_with(s.feat.fq, step_block(s.feat.fq));
  gpu_key_state(s.state_k_out, {s.state_k_in, s.key_new.func(), s.key_read.func()}, s.p.func(), k, done);
  // cp = C p reads C along its rows, 2M floats apart for consecutive threads: a copy of each
  // head's C stored transposed makes their reads consecutive. The copy and Λ (from the
  // parameters alone) are one kernel, Λ fused (compute_with) at the copy's block loop, whose
  // name Λ's first loop takes (compute_with needs them named alike).
  Func c_rows = s.c_mix.in(s.cp.func());
  const std::vector<Var> a = c_rows.args();  // (part, col, row, h)
  c_rows.compute_root()
      .reorder_storage(a[0], a[2], a[1], a[3])
      .bound(a[0], 0, 2)
      .reorder(a[0], a[2], a[1], a[3])
      .unroll(a[0]);
  gpu_stage(c_rows, {a[2], a[1], a[3]}, k.threads, "params");
  Func decay = s.modes.decay_pow.func();
  const std::vector<Var> d = decay.args();  // (n, m, h)
  decay.compute_root().rename(d[0], a[2]);
  gpu_stage(decay, {a[2], d[1], d[2]}, k.threads, "params");
  decay.compute_with(c_rows, gpu_stage_block("params"));
  done.insert({c_rows.name(), decay.name()});
  // p: each block of cp's kernel first adds the key kernel's partial sums for its head and
  // sequence into shared memory (not a kernel of its own).
  gpu_step_block_sum(s.p.func(), gpu_step_sum(s.cp.func(), k, done), k, done);
  // cp loads each (re, im) pair of C's copy as one vector (the copy is our own buffer, so
  // its alignment is known; C itself is the caller's, of unknown alignment).
  Func cp_f = s.cp.func();
  pair_copy(c_rows, cp_f, LoopLevel(cp_f, unrolled(cp_f.rvars(0)[0])), done);
  gpu_step_sum(s.w.func(), k, done);
  gpu_value_state_partials(s.state_v_out, {s.state_v_in, s.value_new.func()}, s.o, s.o_sum, k, done);
  schedule_pipeline_cuda({s.o, s.state_k_out, s.state_v_out}, step_views(s), k, done);
}

void schedule_bla_step_cuda(BlaStepStages &s, const Knobs &k) {
  if (k.fused) {
    schedule_bla_step_cuda_fused(s, k);
    return;
  }
  std::set<std::string> done;
  // φ of the token at every slot (its Dirichlet rotors in double) is one small kernel; γ and
  // the softmax's exponentials are formed where they are used.
  gpu_step_kernel(s.writes.phi, k);
  done.insert(s.writes.phi.name());
  gpu_key_state(s.state_k_out, {}, s.z, k, done);
  // The softmax's exponentials, one kernel: each block first adds the key kernel's partial
  // sums into z for its head and sequence, in shared memory, then each thread takes the maximum
  // and forms its slot's exponential.
  const Var ez_thread = gpu_step_kernel(s.ez, k);
  gpu_step_block_sum(s.z, s.ez, k, done);
  in_registers(s.zmax, s.ez, ez_thread);
  done.insert({s.ez.name(), s.zmax.name()});
  gpu_value_state_whole(s.state_v_out, false, s.o, {s.o_sum, s.den}, k, done);
  schedule_pipeline_cuda({s.o, s.state_k_out, s.state_v_out}, step_views(s), k, done);
}

}  // namespace fsattn
