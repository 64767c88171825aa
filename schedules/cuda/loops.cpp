// Loop helpers and kernel placement shared by every CUDA schedule: loop variables by
// definition and storage order, one stage as one kernel, unrolled serial loops, values kept in
// a thread's registers.
#include "internal.h"

#include <algorithm>

using namespace Halide;

namespace fsattn::cuda_schedule {

// The pure loop variables of one definition of f (-1: the pure definition): the arguments
// that are f's own Var at their position (an update may fix a position, as the scan's
// chunk index, or hold an RVar there).
std::vector<Var> pure_vars(const Func &f, int update) {
  const std::vector<Var> args = f.args();
  std::vector<Var> out;
  if (update < 0) return args;
  const std::vector<Expr> lhs = f.update_args(update);
  for (size_t j = 0; j < lhs.size(); ++j) {
    const Internal::Variable *v = lhs[j].as<Internal::Variable>();
    if (v != nullptr && !v->reduction_domain.defined() && v->name == args[j].name()) out.push_back(args[j]);
  }
  return out;
}

// A loop made by a split is named "<old>.<new>": schedules find it by its last part.
std::string unqualified(const std::string &loop) { return loop.substr(loop.rfind('.') + 1); }

// The reduction loops of f's update u by the names a schedule calls them (rvars() qualifies
// those made by a split, which the scheduling calls refuse).
std::vector<RVar> loop_rvars(const Func &f, int u) {
  std::vector<RVar> out;
  for (const RVar &r : f.rvars(u)) out.push_back(RVar(unqualified(r.name())));
  return out;
}

namespace {

// The position of each of f's arguments in f's storage (0: innermost; reorder_storage may
// have moved them).
size_t storage_rank(const Func &f, const Var &v) {
  const std::vector<Internal::StorageDim> &dims = f.function().schedule().storage_dims();
  for (size_t j = 0; j < dims.size(); ++j) {
    if (dims[j].var == v.name()) return j;
  }
  return dims.size();
}

}  // namespace

// vs, f's pure loop variables, in the order of f's storage (innermost first), so that
// consecutive threads write consecutive elements where f's storage was reordered.
std::vector<Var> in_storage_order(const Func &f, std::vector<Var> vs) {
  std::stable_sort(vs.begin(), vs.end(),
                   [&](const Var &a, const Var &b) { return storage_rank(f, a) < storage_rank(f, b); });
  return vs;
}

// The argument of f stored innermost.
size_t contiguous_dim(const Func &f) {
  const std::vector<Var> a = f.args();
  for (size_t j = 0; j < a.size(); ++j) {
    if (storage_rank(f, a[j]) == 0) return j;
  }
  return 0;
}

// Splits x into kRowThreads threads and y into the rest of `threads`, the threads marked,
// the tails guarded; the caller orders the loops.
RowLoops row_threads(Stage s, const Var &x, const Var &y, int threads, const std::string &prefix) {
  RowLoops l{Var(prefix + "_xo"), Var(prefix + "_xi"), Var(prefix + "_yo"), Var(prefix + "_yi")};
  s.split(x, l.xo, l.xi, kRowThreads, TailStrategy::GuardWithIf)
      .split(y, l.yo, l.yi, std::max(1, threads / kRowThreads), TailStrategy::GuardWithIf)
      .gpu_threads(l.xi, l.yi);
  return l;
}

namespace {

// A stage over a chunk's tokens (x, i, c, h, b) or a call's tokens (x, h, t, b) as one
// kernel without divisions: 32 threads along x and threads/32 along the second dimension, the
// blocks over the rest (fused into one index, recovering five coordinates cost 16 divisions an
// element: 3.6x slower). The scans' state updates keep one element per thread. Sets `thread`;
// false for a stage of another shape.
bool gpu_stage_tiled(Stage s, const std::vector<Var> &pure, int threads, const std::string &prefix, Var &thread) {
  const Vars &v = vars();
  auto shaped = [&](std::initializer_list<const Var *> names) {
    if (pure.size() != names.size()) return false;
    size_t j = 0;
    for (const Var *n : names) {
      if (n != nullptr && pure[j].name() != n->name()) return false;
      ++j;
    }
    return true;
  };
  const bool chunk = shaped({nullptr, &v.i, &v.c, &v.h, &v.b}), tokens = shaped({nullptr, &v.h, &v.t, &v.b});
  if (!chunk && !tokens) return false;
  const RowLoops l = row_threads(s, pure[0], pure[1], threads, prefix);
  if (chunk) {
    s.reorder(l.xo, l.yo, l.xi, l.yi, v.c, v.h, v.b).gpu_blocks(v.c, v.h, v.b);
  } else {
    s.reorder(l.xo, l.xi, l.yi, v.t, l.yo, v.b).gpu_blocks(v.t, l.yo, v.b);
  }
  thread = l.xi;
  return true;
}

}  // namespace

// gpu_stage_tiled where the stage has its shape, else every pure loop fused into one
// (innermost first, so consecutive threads write consecutive elements); reduction loops run
// serially inside each thread.
Var gpu_stage_block(const std::string &prefix) { return Var(prefix + "_blk"); }
Var gpu_stage(Stage s, const std::vector<Var> &pure, int threads, const std::string &prefix) {
  Var tiled;
  if (gpu_stage_tiled(s, pure, threads, prefix, tiled)) return tiled;
  if (pure.empty()) {
    s.gpu_single_thread();
    return Var();
  }
  VarOrRVar fused = pure[0];
  for (size_t j = 1; j < pure.size(); ++j) {
    Var next(prefix + "_f" + std::to_string(j));
    s.fuse(fused, pure[j], next);
    fused = next;
  }
  Var block = gpu_stage_block(prefix), thread(prefix + "_thr");
  s.gpu_tile(fused, block, thread, threads, TailStrategy::GuardWithIf);
  return thread;
}

// Blocks over 1 to 3 loops of s, innermost first (the grid dimensions x, y, z).
void gpu_grid(Stage s, const std::vector<VarOrRVar> &blocks) {
  if (blocks.size() == 1) s.gpu_blocks(blocks[0]);
  if (blocks.size() == 2) s.gpu_blocks(blocks[0], blocks[1]);
  if (blocks.size() == 3) s.gpu_blocks(blocks[0], blocks[1], blocks[2]);
}

// A plain reduction: a pure initial value, then updates over all of f's pure variables,
// each folding a reduction domain into the same element.
bool is_reduction(const Func &f) {
  if (f.num_update_definitions() == 0 || Internal::is_undef(f.values()[0])) return false;
  for (int u = 0; u < f.num_update_definitions(); ++u) {
    if (pure_vars(f, u).size() != f.args().size()) return false;
  }
  return true;
}

// A chunked scan's state (scan.cpp, chunked_scan): an undefined pure value, the entering
// state, then the serial update over the chunks.
bool is_scan_state(const Func &f) { return f.num_update_definitions() == 2 && Internal::is_undef(f.values()[0]); }

// The dimension that tiled_partial_sums gives its pieces.
Var piece_of(const Func &f) { return Var(f.name() + "_piece"); }
bool is_piece(const Var &v) {
  const std::string suffix = "_piece";
  const std::string &n = v.name();
  return n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
}

namespace {

// v's kind (Var or RVar) under another name.
VarOrRVar named_like(const VarOrRVar &v, const std::string &name) {
  return v.is_rvar ? VarOrRVar(RVar(name)) : VarOrRVar(Var(name));
}

// v's serial part ("<v>_uo") and unrolled part ("<v>_ui") in unroll_serial.
VarOrRVar unroll_part(const VarOrRVar &v, const std::string &suffix) {
  std::string fresh = unqualified(v.name());
  std::replace(fresh.begin(), fresh.end(), '$', '_');
  return named_like(v, fresh + suffix);
}

}  // namespace

VarOrRVar unrolled(const VarOrRVar &v) { return unroll_part(v, "_ui"); }

void unroll_serial(Stage s, const VarOrRVar &v, int factor) {
  s.split(named_like(v, unqualified(v.name())), unroll_part(v, "_uo"), unrolled(v), factor, TailStrategy::GuardWithIf)
      .unroll(unrolled(v));
}

// g computed inside a thread of f's kernel, one value, in registers; its reduction loop
// unrolled, where `unroll`, so that the loads of several iterations are in flight together.
Func in_registers(Func g, const Func &f, const Var &thread, bool unroll, int factor) {
  g.compute_at(f, thread).store_in(MemoryType::Register);
  for (const Var &a : g.args()) g.bound_extent(a, 1);
  for (int u = 0; u < g.num_update_definitions() && unroll; ++u) unroll_serial(g.update(u), g.rvars(u)[0], factor);
  return g;
}

}  // namespace fsattn::cuda_schedule
