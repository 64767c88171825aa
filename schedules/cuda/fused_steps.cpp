// The decoding steps as one kernel, a block per head and sequence. The block runs the step
// in phases, each a loop over its threads that Halide separates by barriers: Λ or φ, the
// features (IDA), the key state's read (kBlockLanes partial sums, then their sum), the slot
// transform (IDA's mixing, BLA's softmax), the value state's read, and last both new states,
// each thread writing the elements it reads (again, from L2), so the update may be in place.
// In every phase the thread loop is outermost (a serial loop around it would cost a barrier an
// iteration) and one-dimensional (Halide sizes the block by the largest thread loop). Values a
// thread sums in registers are computed inside its innermost loop, under the guard of its
// split, which bounds what they read. One launch instead of 4 (BLA) or 9 (IDA): the faster at
// small batches (the tuning table picks by batch).
#include "internal.h"

#include <algorithm>
#include <tuple>

using namespace Halide;

namespace fsattn::cuda_schedule {

namespace {

constexpr int kBlockLanes = 4;  // partial sums per value of the reads along channels or modes
struct StepBlock {
  Func root;    // the output o(r, h, t, b), whose (h, b) loop is the block
  int threads;  // per block: a multiple of 64
  int unroll;   // of the threads' loops over the states (more loads in flight, more registers)
};

// The block: o's (h, b), its channels 64 threads a step; `in_thread` (o's sums) in registers.
StepBlock step_block_root(Func o, const std::vector<Func> &in_thread, const Knobs &k, std::set<std::string> &done) {
  const Vars &x = vars();
  Var ro("ro"), rv("rv");
  o.compute_root()
      .bound(x.t, 0, 1)
      .split(x.r, ro, rv, 64, TailStrategy::GuardWithIf)
      .reorder(x.t, ro, rv, x.h, x.b)
      .gpu_blocks(x.h, x.b)
      .gpu_threads(rv);
  for (Func g : in_thread) done.insert(in_registers(g, o, ro, false).name());
  done.insert(o.name());
  return {o, std::max(64, k.threads / 64 * 64), std::max(1, k.unroll)};
}

// f(v, ...) (one value per slot, mode or channel: along its first argument, or along `along`)
// formed by the block into shared memory, one thread per value. Returns the loop inside the
// thread, where values that f's element needs are computed.
Var block_vector(Func f, const StepBlock &blk, std::set<std::string> &done, const Var *along = nullptr) {
  const Vars &x = vars();
  const Var v = along != nullptr ? *along : f.args()[0];
  Var so(f.name() + "_so"), si(f.name() + "_si");
  f.compute_at(blk.root, x.h)
      .store_in(MemoryType::GPUShared)
      .split(v, so, si, blk.threads, TailStrategy::GuardWithIf)
      .reorder(so, si)
      .gpu_threads(si);
  done.insert(f.name());
  return so;
}

// A reduction f(v, ...) over its first reduction variable, as the block's vector (one
// thread per value, summed in a register, its loop unrolled so that its loads are in flight
// together).
void block_sum(Func f, const StepBlock &blk, std::set<std::string> &done) {
  Func rows = f.in();
  done.insert(in_registers(f, rows, block_vector(rows, blk, done)).name());
}

// The reduction f(v, ...) split into `lanes` partial sums (rfactor: the reduction's elements
// `lanes` apart), formed by the block into shared memory, a thread per (lane, v), `unroll`ing
// each thread's sum; f then adds the lanes (the caller schedules it). `lanes_first`: the
// lanes are the block's innermost thread index (consecutive threads read consecutive
// elements along the reduction), else v is. Each thread's loop is unrolled `unroll` times
// (1: not unrolled).
void block_lanes(Func f, int lanes, bool lanes_first, int unroll, const StepBlock &blk, std::set<std::string> &done) {
  const Vars &x = vars();
  const std::string p = f.name() + "_lanes";
  RVar rj(p + "_rj"), rl(p + "_rl");
  Var u(p + "_u"), vo(p + "_vo"), vi(p + "_vi"), t(p + "_t");
  Func partial = f.update(0).split(f.rvars(0)[0], rj, rl, lanes, TailStrategy::GuardWithIf).rfactor(rl, u);
  Func in = partial.in(f);
  std::vector<Var> rest;  // in's arguments but u (where rfactor put it): (v, ...)
  for (const Var &a : in.args()) {
    if (a.name() != u.name()) rest.push_back(a);
  }
  const Var v = rest[0];
  in.compute_at(blk.root, x.h).store_in(MemoryType::GPUShared).bound(u, 0, lanes);
  in.split(v, vo, vi, blk.threads / lanes, TailStrategy::GuardWithIf);
  std::vector<VarOrRVar> order{vo};
  if (lanes_first) {
    order.push_back(u);
    order.push_back(vi);
  } else {
    order.push_back(vi);
    order.push_back(u);
  }
  order.insert(order.end(), rest.begin() + 1, rest.end());
  in.reorder(order);
  in.fuse(lanes_first ? u : vi, lanes_first ? vi : u, t).gpu_threads(t);
  in_registers(partial, in, vo, unroll > 1, unroll);
  done.insert({partial.name(), in.name(), f.name()});
}

// The new states `outs` (r, m, h, b) or, complex, (ri, r, m, h, b) (`pairs`: StatePairs),
// written in the block after the output (compute_with), a phase each: threads over 64 channels
// × the rest of the block in modes, each thread a loop over its modes, unrolled blk.unroll
// times. (Both states in one phase made Halide 14 fail in ScheduleFunctions.)
void block_state_writes(const std::vector<Func> &outs, const StepBlock &blk, std::set<std::string> &done,
                        const std::vector<StatePairs> &pairs = {}) {
  const Vars &x = vars();
  Var co("w_co"), cv("w_cv"), so("w_so"), sv("w_sv"), t("w_t");
  const int rows = std::max(1, blk.threads / 64);
  const bool complex = !pairs.empty();
  for (size_t j = 0; j < outs.size(); ++j) {
    Func out = outs[j];
    out.compute_root()
        .split(x.r, co, cv, 64, TailStrategy::GuardWithIf)
        .split(x.m, so, sv, rows, TailStrategy::GuardWithIf);
    if (complex) {
      // Both parts of a complex element by one thread, as one vector, from the old pair
      // loaded as one vector (pair_copy, below): the thread has read both old parts before it
      // stores either. (With re and im on two threads, the thread for im read the old re that
      // its neighbour stores: right only while the warp runs the loads before the stores.)
      out.bound(x.ri, 0, 2).reorder(x.ri, so, co, cv, sv, x.h, x.b).vectorize(x.ri);
    } else {
      out.reorder(so, co, cv, sv, x.h, x.b);
    }
    out.fuse(cv, sv, t).gpu_blocks(x.h, x.b).gpu_threads(t).compute_with(blk.root, x.h);
    unroll_serial(out, so, blk.unroll);
    if (complex) pair_copy(pairs[j].state, pairs[j].write, LoopLevel(out, unrolled(so)), done);  // per iteration
    done.insert(out.name());
  }
}

}  // namespace

void schedule_bla_step_cuda_fused(BlaStepStages &s, const Knobs &k) {
  std::set<std::string> done;
  const StepBlock blk = step_block_root(s.o, {s.o_sum, s.den}, k, done);
  block_vector(s.writes.phi, blk, done);                       // φ of the token at every slot (rotors in double)
  block_lanes(s.z, kBlockLanes, true, blk.unroll, blk, done);  // z's partial sums
  block_sum(s.z, blk, done);                                   // z
  done.insert(in_registers(s.zmax, s.ez, block_vector(s.ez, blk, done)).name());  // exponentials
  block_lanes(s.o_sum, kValueGroups, false, blk.unroll, blk, done);               // the output's partial sums
  block_state_writes({s.state_k_out, s.state_v_out}, blk, done);
  schedule_pipeline_cuda({s.o, s.state_k_out, s.state_v_out}, step_views(s), k, done);
}

void schedule_ida_step_cuda_fused(IdaStepStages &s, const Knobs &k) {
  std::set<std::string> done;
  const StepBlock blk = step_block_root(s.o, {s.o_sum}, k, done);
  block_vector(s.modes.decay_pow.func(), blk, done, &vars().m);  // Λ of every mode
  // The features, each from a copy in shared memory of what its norm sums over.
  IdaFeatures &f = s.feat;
  for (auto [feature, norm, x] :
       {std::tuple(f.fq, f.q_ssq, f.q_act), std::tuple(f.kt, f.k_ssq, f.k_act), std::tuple(f.vt, f.v_ssq, f.v)}) {
    Func staged = x.in({norm, feature});
    block_vector(staged, blk, done);
    done.insert(in_registers(norm, feature, block_vector(feature, blk, done)).name());
  }
  block_lanes(s.p.func(), kBlockLanes, true, blk.unroll, blk, done);  // p's partial sums
  block_sum(s.p.func(), blk, done);                                   // p = Xk fq
  // cp = C p and w = C^T cp, each in lanes along its sum, so that a thread waits on M / 4
  // of C's elements, not M.
  for (Func g : {s.cp.func(), s.w.func()}) {
    block_lanes(g, kBlockLanes, true, blk.unroll, blk, done);
    block_sum(g, blk, done);
  }
  block_lanes(s.o_sum, kValueGroups, false, blk.unroll, blk, done);  // the output's partial sums
  block_state_writes({s.state_k_out, s.state_v_out}, blk, done,
                     {{s.state_k_in, s.key_new.func()}, {s.state_v_in, s.value_new.func()}});
  schedule_pipeline_cuda({s.o, s.state_k_out, s.state_v_out}, step_views(s), k, done);
}

}  // namespace fsattn::cuda_schedule
