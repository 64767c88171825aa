// Register tiles for the matmul-like reductions, their operands copied as vectors, and
// sums over a call's tokens as partial sums. The measurements behind each choice are in
// docs/performance-log.md (CUDA schedule decisions).
#include "internal.h"

#include "schedules/register_budget.h"

#include <algorithm>

using namespace Halide;

namespace fsattn::cuda_schedule {

// Along a channel, mode or slot a patch spans at most kPatchExtent values (D = M = S = 64
// at the benchmark shape): wider, most of it would lie past the state.
constexpr int kPatchExtent = 64;

// A plain reduction f(x, y, ...) as register tiles: a block covers a (TX tile) × (TY tile)
// patch of (x, y), each thread a tile × tile piece accumulated in registers over the whole
// reduction and stored once to a wrapper of f that every consumer reads. A tile's kernel is
// named for its register budget (register_budget.h): at Halide's 64, most 4×4 tiles spill.
// Chunks, heads and batch elements take the grid's y and z (fused into one block index, their
// bounds widened to the whole range and a tile's buffer left registers); the batch shares x
// with the patches where y and z are taken.
void gpu_tiled_reduction(Func f, const Knobs &k, const TileKind &kind) {
  Func stored = f.in();
  const std::vector<Var> a = stored.args();
  const std::string p = f.name() + "_in";
  const Var &x = a[0], &y = a[1];
  // Stored along y (a consumer's reorder_storage): each thread stores its tile's values of
  // one x as one vector, y's extent rounded up to whole blocks so that no store is guarded.
  const bool y_major = contiguous_dim(stored) == 1;
  // Threads along a token (or lag) dimension cover at most the chunk (more tile tokens past
  // it), and 8 along x unless x is a channel, so that a warp reads few rows of a state a step.
  const Vars &v = vars();
  const int R = kind.size;
  auto threads_along = [&](const Var &d, int most) {
    const bool token = d.name() == v.i.name() || d.name() == v.tau.name() || d.name() == v.n.name();
    return std::max(1, std::min(most, token ? (k.chunk + R - 1) / R : kPatchExtent / R));
  };
  const int TX = threads_along(x, x.name() == v.r.name() ? 16 : 8), TY = threads_along(y, std::max(1, k.threads / TX));
  Var xo(p + "_xo"), xi(p + "_xi"), yo(p + "_yo"), yi(p + "_yi"), tx(p + "_tx"), ty(p + "_ty"), rx(p + "_rx"),
      ry(p + "_ry"), patch(p + "_patch");
  if (y_major) stored.align_bounds(y, TY * R);
  stored.compute_root()
      .split(x, xo, xi, TX * R, TailStrategy::GuardWithIf)
      .split(y, yo, yi, TY * R, y_major ? TailStrategy::RoundUp : TailStrategy::GuardWithIf)
      .split(xi, tx, rx, R)
      .split(yi, ty, ry, R);
  // Grid dimensions y and z: the first two of chunk, head, batch that f has. Grid dimension
  // x: the patches, with the pieces of a sum split into partial sums (tiled_partial_sums) and
  // the batch where chunks and heads took y and z.
  std::vector<VarOrRVar> serial, blocks{patch};
  std::vector<Var> with_patches;  // fused into grid x
  for (size_t j = 2; j < a.size(); ++j) {
    const std::string n = a[j].name();
    const bool grid = n == v.c.name() || n == v.h.name() || n == v.b.name();
    if (is_piece(a[j]) || (n == v.b.name() && blocks.size() == 3)) {
      with_patches.push_back(a[j]);
    } else {
      (grid && blocks.size() < 3 ? blocks : serial).push_back(a[j]);
    }
  }
  std::vector<VarOrRVar> order{rx, ry, tx, ty};
  if (y_major) std::swap(order[0], order[1]);
  order.insert(order.end(), serial.begin(), serial.end());
  order.push_back(xo);
  order.push_back(yo);
  order.insert(order.end(), with_patches.begin(), with_patches.end());
  order.insert(order.end(), blocks.begin() + 1, blocks.end());
  stored.reorder(order).fuse(xo, yo, patch);
  for (const Var &d : with_patches) stored.fuse(patch, d, patch);
  if (kind.budget != nullptr) {  // (the kernel is named after its outermost block loop)
    const Var outer = blocks.back().var, named(outer.name() + "_" + kind.budget);
    stored.rename(outer, named);
    blocks.back() = named;
  }
  gpu_grid(stored, blocks);
  stored.gpu_threads(tx, ty).unroll(rx);
  if (y_major) {
    stored.vectorize(ry);
  } else {
    stored.unroll(ry);
  }
  // The tile is computed whole, also where the region a consumer needs is clipped (the last
  // chunk, a clamped index): registers need a constant size. Past the true sizes the stages
  // read zeros through `chunked`, and parameters and states through clamped indices.
  f.compute_at(stored, tx).bound_extent(x, R).bound_extent(y, R).unroll(x).unroll(y);
  if (y_major) f.reorder_storage(y, x);
  for (size_t j = 2; j < a.size(); ++j) f.bound_extent(f.args()[j], 1);
  for (int u = 0; u < f.num_update_definitions(); ++u) {
    std::vector<VarOrRVar> dims{x, y};
    for (const RVar &r : loop_rvars(f, u)) dims.push_back(r);
    for (size_t j = 2; j < a.size(); ++j) dims.push_back(f.args()[j]);
    f.update(u).reorder(dims).unroll(x).unroll(y);
  }
}

namespace {

// Calls to other Funcs in f's update u, by callee: each call's arguments.
std::map<std::string, std::vector<std::vector<Expr>>> update_calls(const Func &f, int u) {
  struct Calls : Internal::IRVisitor {
    using Internal::IRVisitor::visit;
    std::map<std::string, std::vector<std::vector<Expr>>> args;
    void visit(const Internal::Call *op) override {
      if (op->call_type == Internal::Call::Halide) args[op->name].push_back(op->args);
      Internal::IRVisitor::visit(op);
    }
  } calls;
  const Tuple values = f.update_values(u);  // (as_vector() refers into the Tuple)
  for (const Expr &e : values.as_vector()) e.accept(&calls);
  calls.args.erase(f.name());
  return calls.args;
}

// A tiled operand g is read through its stored copy (its global wrapper), else g itself.
Func stored_copy_source(const Internal::Function &g) {
  const auto &wrappers = g.schedule().wrappers();
  const auto global = wrappers.find("");
  return global != wrappers.end() ? Func(Internal::Function(global->second)) : Func(g);
}

}  // namespace

// A tile's reduction in steps of kReductionStep, unrolled; each step first copies what it
// reads of each stored operand into registers as one vector (ld.v4) along the operand's
// contiguous dimension, then multiplies from the copies (the tiles are bound by the L1 pipe).
// Causal sums are stepped but not copied (their copies went to local memory). With
// `complex_operands`, complex operands are copied too, each part a vector.
void vector_tile_reduction(Func f, int tile, const std::set<std::string> &stored_stages, bool complex_operands) {
  const std::vector<Var> a = f.args();
  for (int u = 0; u < f.num_update_definitions(); ++u) {
    const std::vector<RVar> rv = f.rvars(u);  // (as the update's expressions name them)
    if (rv.empty()) continue;
    const bool causal = !Internal::is_const_one(f.function().update(u).predicate());
    const bool copies = !causal && (f.outputs() == 1 || complex_operands);
    // Values of each index that a thread's step reads: kReductionStep of the reduction's, tile
    // of the tile's, 1 of an index that involves neither; 0: an index that mixes them.
    auto extent = [&](const Expr &e) {
      const Internal::Variable *v = e.as<Internal::Variable>();
      if (v != nullptr && v->name == rv[0].name()) return kReductionStep;
      if (v != nullptr && (v->name == a[0].name() || v->name == a[1].name())) return tile;
      const bool mixes = Internal::expr_uses_var(e, rv[0].name()) || Internal::expr_uses_var(e, a[0].name()) ||
                         Internal::expr_uses_var(e, a[1].name());
      return mixes ? 0 : 1;
    };
    // The operands to copy: real stored stages read in one shape, more than one value wide
    // along their contiguous dimension (as extents per dimension).
    const std::map<std::string, Internal::Function> callees = Internal::find_direct_calls(f.function());
    struct Copied {
      Func stored;               // what the copy reads: stored_copy_source
      size_t inner;              // its contiguous dimension
      std::vector<int> extents;  // per dimension
    };
    std::vector<Copied> copied;
    for (const auto &[name, calls] : update_calls(f, u)) {
      const Internal::Function g = callees.at(name);
      if (!copies || stored_stages.count(name) == 0 || (g.outputs() > 1 && !complex_operands)) continue;
      std::vector<int> extents;
      for (const Expr &e : calls[0]) extents.push_back(extent(e));
      const bool regular = std::all_of(calls.begin(), calls.end(), [&](const std::vector<Expr> &args) {
        for (size_t j = 0; j < args.size(); ++j) {
          if (extent(args[j]) != extents[j] || extents[j] == 0) return false;
        }
        return true;
      });
      const Func stored = stored_copy_source(g);
      const size_t inner = contiguous_dim(stored);
      if (regular && inner < extents.size() && extents[inner] > 1) copied.push_back({stored, inner, extents});
    }
    if (!causal && copied.empty()) continue;
    const std::string p = f.name() + "_step" + std::to_string(u);
    const RVar ro(p + "_ro"), ri(p + "_ri");
    f.update(u).split(loop_rvars(f, u)[0], ro, ri, kReductionStep, TailStrategy::GuardWithIf).unroll(ri);
    for (auto &[stored, inner, extents] : copied) {
      stored.align_bounds(stored.args()[inner], kReductionStep);
      Func copy = stored.in(f);
      const std::vector<Var> ca = copy.args();
      copy.compute_at(f, ro).store_in(MemoryType::Register);
      for (size_t j = 0; j < ca.size(); ++j) {
        copy.bound_extent(ca[j], extents[j]);
        if (j != inner && extents[j] > 1) copy.unroll(ca[j]);
      }
      if (inner != 0) copy.reorder_storage(ca[inner], ca[0]);
      copy.vectorize(ca[inner]);
    }
  }
}

// Whether f's first two dimensions are within a chunk or a state (channel, slot, token,
// lag) or the chunk index, the ones a tile may run past: inputs are read there through clamps.
// A tile never runs past the heads or batch elements, whose inputs are not clamped.
bool tiles_within_chunks(const Func &f) {
  if (f.args().size() < 2) return false;
  const Vars &v = vars();
  for (int j = 0; j < 2; ++j) {
    const std::string n = f.args()[j].name();
    if (n != v.r.name() && n != v.m.name() && n != v.m2.name() && n != v.i.name() && n != v.tau.name() &&
        n != v.n.name() && n != v.c.name()) {
      return false;
    }
  }
  return true;
}

// A sum over the call's tokens or chunks per element of a small result (a parameter
// gradient's terms per head and batch element) as partial sums: each update keeps one reduction
// loop as a dimension of an intermediate (rfactor), one thread per element, then adds them.
// The loop kept is the outermost (a single token loop split into kPartialTokens pieces), or
// with `keep_innermost` the innermost, then the threads' innermost dimension so that a warp's
// loads are consecutive. (One thread per element summing every token was 8192 threads.)
void partial_sums(Func f, bool keep_innermost, const Knobs &k, std::set<std::string> &done) {
  for (int u = 0; u < f.num_update_definitions(); ++u) {
    const std::vector<RVar> rv = f.rvars(u);
    const std::string p = f.name() + "_part" + std::to_string(u);
    const Var part(p);
    Func partial;
    if (keep_innermost) {
      partial = f.update(u).rfactor(rv[0], part);
    } else if (rv.size() == 1) {
      const RVar ro(p + "_ro"), ri(p + "_ri");
      partial = f.update(u).split(rv[0], ro, ri, kPartialTokens, TailStrategy::GuardWithIf).rfactor(ro, part);
    } else {
      partial = f.update(u).rfactor(rv.back(), part);
    }
    std::vector<Var> order;  // the thread index's dimensions, innermost first
    for (const Var &a : partial.args()) {
      if (a.name() != p) order.push_back(a);
    }
    order.insert(keep_innermost ? order.begin() : order.end(), part);
    partial.compute_root();
    for (int v = -1; v < partial.num_update_definitions(); ++v) {
      Stage st = v < 0 ? Stage(partial) : partial.update(v);
      std::vector<VarOrRVar> loops;  // its reductions inside each thread, then `order`
      if (v >= 0) {
        for (const RVar &r : loop_rvars(partial, v)) loops.push_back(r);
      }
      loops.insert(loops.end(), order.begin(), order.end());
      st.reorder(loops);
      gpu_stage(st, order, k.threads, p + "_s" + std::to_string(v + 1));
    }
    done.insert(partial.name());
  }
}

// A sum over the call's tokens per element of a state-sized result (IDA's mixing gradient)
// as pieces of kPartialTokens tokens, a dimension that the register tiles run in the grid
// (gpu_tiled_reduction), which f then adds.
void tiled_partial_sums(Func f) {
  const RVar token = f.rvars(0)[0];
  const RVar ro(f.name() + "_pieces"), ri(f.name() + "_within");
  f.update(0).split(token, ro, ri, kPartialTokens, TailStrategy::GuardWithIf).rfactor(ro, piece_of(f));
}

}  // namespace fsattn::cuda_schedule
