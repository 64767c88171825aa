#include "cuda.h"

#include "register_budget.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <tuple>

using namespace Halide;

namespace fsattn {

namespace {

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

// The position of each of f's arguments in f's storage (0: innermost; reorder_storage may
// have moved them).
size_t storage_rank(const Func &f, const Var &v) {
  const std::vector<Internal::StorageDim> &dims = f.function().schedule().storage_dims();
  for (size_t j = 0; j < dims.size(); ++j) {
    if (dims[j].var == v.name()) return j;
  }
  return dims.size();
}

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

// Threads along the rows of per-token vectors: 32 along the vector, the rest of the block
// along the second dimension.
constexpr int kRowThreads = 32;

// The loops of a stage tiled by row_threads: the thread loops xi, yi and, around them inside
// each thread, the rest of the two dimensions xo, yo.
struct RowLoops {
  Var xo, xi, yo, yi;
};

// Splits x into kRowThreads threads and y into the rest of `threads`, the threads marked,
// the tails guarded; the caller orders the loops.
RowLoops row_threads(Stage s, const Var &x, const Var &y, int threads, const std::string &prefix) {
  RowLoops l{Var(prefix + "_xo"), Var(prefix + "_xi"), Var(prefix + "_yo"), Var(prefix + "_yi")};
  s.split(x, l.xo, l.xi, kRowThreads, TailStrategy::GuardWithIf)
      .split(y, l.yo, l.yi, std::max(1, threads / kRowThreads), TailStrategy::GuardWithIf)
      .gpu_threads(l.xi, l.yi);
  return l;
}

// A stage over a chunk's tokens (x, i, c, h, b) or over a call's tokens (x, h, t, b) as one
// kernel without divisions: 32 threads along its first dimension and threads/32 along its
// second, each thread looping over the rest of those two, the blocks over the others (the
// tokens t in the grid's x, which holds 2^31 - 1 blocks; chunks, heads and batch elements
// are refused past 65535). Its reduction loops, if any, run serially inside each thread.
// (With every dimension fused into one thread index, recovering five coordinates took 8
// divisions and 8 remainders by runtime extents per element: the chunked copy of q took
// 0.36 ms, 5× its memory traffic, B=8 T=4096 H=16 D=64 on the H200; so tiled, 0.10 ms.) The
// scans' state updates (x, y, h, b) keep one element per thread: each thread is a chain of
// dependent steps over the chunks, and tiled so, with half the threads, IDA's took 0.47 ms
// instead of 0.30. Sets `thread` to the thread loop along x; false for a stage of another
// shape, which is left as it is.
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

// One definition of a Func as one kernel: gpu_stage_tiled where the stage has its shape,
// else every pure loop fused into one (innermost first, so that consecutive threads write
// consecutive elements), `threads` per block; its reduction loops, if any, run serially
// inside each thread.
// Returns the thread loop (undefined for a single-thread kernel); the fused loop's block
// loop is gpu_stage_block(prefix).
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

// Whether f is a plain reduction: a pure initial value, then updates over all of f's pure
// variables, each folding a reduction domain into the same element.
bool is_reduction(const Func &f) {
  if (f.num_update_definitions() == 0 || Internal::is_undef(f.values()[0])) return false;
  for (int u = 0; u < f.num_update_definitions(); ++u) {
    if (pure_vars(f, u).size() != f.args().size()) return false;
  }
  return true;
}

// Whether f is a chunked scan's state (scan.cpp, chunked_scan): an undefined pure value, the
// entering state, then the serial update over the chunks.
bool is_scan_state(const Func &f) {
  return f.num_update_definitions() == 2 && Internal::is_undef(f.values()[0]);
}

// The dimension that tiled_partial_sums gives its pieces.
Var piece_of(const Func &f) { return Var(f.name() + "_piece"); }
bool is_piece(const Var &v) {
  const std::string suffix = "_piece";
  const std::string &n = v.name();
  return n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A plain reduction f(x, y, ...) (not an output) as register tiles: a block of threads
// covers a (TX tile) × (threads/TX tile) patch of (x, y) (TX: 16 along channels, 8 along
// modes, slots or tokens; see below), each thread a tile × tile piece of
// it, accumulated in registers over the whole reduction (each step loads tile values of each
// operand for tile² multiply-adds), then stored once to a wrapper of f that every consumer
// reads. (Accumulating in f's own buffer, each step would load and store it in global
// memory, and its initial value would be a kernel of its own.) tile = 1: one element per
// thread.
//
// A `wide` tile's kernel is named for its variant's register budget (register_budget.h;
// `registers=` in generators/CMakeLists.txt); every other kernel runs with Halide's 64 a
// thread. At 64, most 4×4 tiles spill to local memory (ptxas for sm_90: IDA's backward
// reads within the chunk 1800 bytes each, its mixing 268-312, its reads through the state
// 284-312), and at 128 most run faster; the IDA forward's read through the state and IDA's
// carries, whose operands are copied into registers (vector_tile_reduction), then take
// 76-96 and lose occupancy: its schedules keep them narrow (kIdaForwardTiles,
// kIdaBackwardTiles; BLA's, real-valued, gain). Nsight Compute on the H200 (B=8 T=4096
// H=16 D=M=S=64, chunk 32, 4×4 tiles), 64 against 128 registers: IDA's hk_intra and
// hv_intra 2.61 -> 0.85 ms, p_intra and gw_intra 1.09 -> 0.60, w and w2 1.05-1.13 -> 0.85,
// BLA's dk_intra and dv_intra 0.26 -> 0.20; but the IDA forward's p_inter 0.69 -> 1.04 and
// its carries 0.62-0.65 -> 0.76-0.84 (kept narrow), and
// BLA's softmax, no tile, 0.28 -> 0.40.
//
// A `large` tile (CudaKnobs::large_tile, 8×8) has 255 registers a thread (kLargeRegisters):
// 64 multiply-adds per step for 16 operand values, where a 4×4 tile does 16 for 8, and
// fewer threads to hide latency. It pays off where the tiles are many (the reads through a
// chunk's state and the query's reads of the states, both over the whole chunk: their tokens
// are not summed) and loses where the patch is a chunk's tokens against its own tokens (the
// reads within the chunk, 4 threads along a 32-token chunk). Nsight Compute on the H200 (B=8
// T=4096 H=16 D=M=S=64, chunk 32), 4×4 against 8×8: IDA's dkt_inter and dvt_inter 1.20 ->
// 0.84 ms, hk/hv/gw_inter 1.16-1.17 -> 0.78-0.79, o_inter 1.03 -> 0.68, the *_qx reads 0.31
// -> 0.18; BLA's dpi_inter 0.61 -> 0.36, dk_e and dv_e 0.41 -> 0.24, o_e 0.31 -> 0.22; but
// IDA's p_intra 0.58 -> 1.75 (spilling 248 bytes), its mixing w 0.77 -> 0.96 and its *_e
// 0.38 -> 0.47, BLA's o_intra 0.40 -> 0.53 and its forward's carries 0.26-0.27 -> 0.29-0.31.
// The schedules list their large tiles (kIdaLargeTiles, kBlaForwardTiles,
// kBlaBackwardTiles).
//
// The blocks run over the patches (x) and the first two of the chunks, heads and batch
// elements (y, z). The batch, where chunks and heads take y and z, shares x with the
// patches (as the pieces of partial sums do): as a loop inside each block, the scans' tiles
// ran one block per patch, chunk and head, 256-512 blocks at B=2 T=2048 H=4 (chunk 32) for
// the H200's 132 SMs. In the grid, at B=2 T=2048 H=4 (H200, cuda_c32_r4, one run against
// the previous build): IDA forward 0.530 -> 0.438 ms, forward+backward 2.37 -> 2.06; BLA
// 0.258 -> 0.230 and 0.992 -> 0.901; at B=8 T=4096 H=16, IDA forward 7.65 -> 7.49,
// forward+backward 37.0 -> 36.1, BLA forward 3.72 -> 3.77, forward+backward 15.1 -> 14.8
// (the "before" times at that shape from an earlier run). Fused into one block index, the
// chunk, head and batch of a thread are divisions and remainders by symbolic extents, whose
// bounds Halide 14 widens to the whole range: each thread's tile then spans every chunk,
// goes to a global-memory buffer instead of registers, and that buffer's 32-bit index
// overflowed at IDA B=8, T=4096, H=16 (CUDA_ERROR_ILLEGAL_ADDRESS on the H200); the tile's
// extent along every dimension but its first two is bounded to 1 (below), which keeps it in
// registers.
// A grid dimension y or z holds at most 65535 blocks: the runtime refuses more chunks, heads
// or batch elements (check_cuda_grid).
//
// A tile's size and its register budget: `budget` is a kernel name marker of
// register_budget.h, or null for Halide's 64 registers (a narrow tile).
struct TileKind {
  int size;
  const char *budget;
};
// Along a channel, mode or slot, a block's patch spans at most kPatchExtent values (D, M, S =
// 64 at the benchmark shape): 8×8 tiles with 16 threads along channels would cover 128, half
// of them past D = 64.
constexpr int kPatchExtent = 64;
void gpu_tiled_reduction(Func f, const CudaKnobs &k, const TileKind &kind) {
  Func stored = f.in();
  const std::vector<Var> a = stored.args();
  const std::string p = f.name() + "_in";
  const Var &x = a[0], &y = a[1];
  // Stored along y (a consumer's reorder_storage): each thread stores its tile's values of
  // one x as one vector, y's extent rounded up to whole blocks so that no store is guarded.
  const bool y_major = contiguous_dim(stored) == 1;
  // A token (or lag) dimension within a chunk has the chunk's extent: at chunk 32 and 4×4
  // tiles, 16 threads along it would tile 64 tokens, half of them past the chunk (the
  // intra-chunk products over (tau, i) took 0.69-0.83 ms each so, 0.42-0.51 ms with 8; B=8
  // T=4096 H=16 on the H200). Along x, 8 threads unless x is a channel: the operands of these
  // reductions are mostly stored with the summed dimension contiguous, so each thread along x
  // reads rows of its own, and a warp of 16 × 2 threads read 16 rows of a state per step (the
  // L1 pipe at 98%: IDA's p_inter took 2.48 ms, 1.55 ms with a warp of 8 × 4).
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

// A register tile's reduction in steps of kReductionStep of its first loop, unrolled, and the
// operands that it reads from stored stages loaded kReductionStep values at a time. Each
// thread's step first copies what it reads of each such operand into registers, a vector along
// the operand's contiguous dimension (its first, or the one its storage puts first: mode_major)
// where that is the reduction's (kReductionStep values a step) or the tile's (tile values),
// then multiplies from the copies; the operand's rows are aligned to kReductionStep
// (align_bounds, and mins at 0: mins_at_zero), so a copy is one 128-bit load (PTX ld.v4;
// ld.v2 for 2×2 tiles) where it was four (two) scalar loads. (The tiles are bound by the L1 pipe's
// throughput, 98% in Nsight Compute on the H200: a vector load uses it once for four values.)
//
// Measured per kernel with Nsight Compute on the H200 (B=8 T=4096 H=16, D=S=M=64, chunk 32,
// 4 × 4 tiles), where it is applied: BLA's key read through the state 845 -> 660 µs, its
// within-chunk product 427 -> 335, the carries 473 -> 296 each; the value read through the
// state 424 -> 432 (its state's copy along the tile's channels). The causal sums bounded by
// the token (Masking, grid.h) are stepped but not copied (their copies went to local memory,
// indexed at run time), and were faster so: IDA's key read within the chunk 1.89 -> 1.52
// ms, BLA's two 0.40 -> 0.34 ms (but IDA's value read 0.32 -> 0.37 ms). Complex sums and
// operands are left as they were (but see complex_operands below): stepped, at 64 registers
// a thread, IDA's mixing took 1.08 -> 1.59 ms and its read through the state 0.89 -> 1.29 ms
// (twice as many values in registers); copied as well, 1.94 and 1.30 ms.
constexpr int kReductionStep = 4;
// A tiled operand g is read through its stored copy (its global wrapper), else g itself.
Func stored_copy_source(const Internal::Function &g) {
  const auto &wrappers = g.schedule().wrappers();
  const auto global = wrappers.find("");
  return global != wrappers.end() ? Func(Internal::Function(global->second)) : Func(g);
}

// With `complex_operands`, a complex tile copies its complex operands too (each part a
// vector). IDA's backward reads through its channel-major chunk states so (hk, hv, gw and
// p_inter: complex sums over the contiguous channels): each thread's step loads four channels
// of each of its rows as one vector per part, where it loaded one value per row, and a warp's
// load 32 rows for 32 values (Nsight Compute: L1 97% busy, 43% of the sectors excessive).
// Each 1.40 -> 1.21 ms (their 128 registers spill 24-44 bytes; at 64 p_inter spilled 288),
// IDA forward+backward 37.5 -> 36.7 ms, cuda_c32_r2 51.5 -> 49.2 (H200, B=8 T=4096 H=16
// D=M=64, two rounds).
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
      Func stored;                // what the copy reads: stored_copy_source
      size_t inner;               // its contiguous dimension
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

// Whether the first two dimensions of f are within a chunk or a state (channel, slot, token,
// lag) or the chunk index, the ones a tile may run past: the inputs are read there through
// clamps (and states past the last chunk feed only values that are discarded). A tile never
// runs past the heads or batch elements, whose inputs are not clamped.
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

// A serial loop inside a thread, kStepUnroll iterations a step, so that their loads are in
// flight together. (It costs registers: unrolled, IDA's key kernel took 52 µs instead of 48,
// at 64 registers a thread, and its value kernel, before it had partial sums, 65 instead of
// 62; BLA's value kernel, over real values, 36 µs instead of 41, and its key kernel 25 µs
// instead of 31 once its reads were no longer clamped. B=64, H200. Unrolled 4-wide, IDA's key
// kernel took as long, and the IDA step longer end to end, before its (re, im) pairs were
// vector loads: see kPairUnroll.)
constexpr int kStepUnroll = 8;

// The IDA step's per-state kernels' loops over complex elements, each element an (re, im)
// pair loaded as one 8-byte vector (StatePairs): the reads' partial sums and the writes, each
// unrolled 4 times. Key kernel 43.4 -> 40.4 µs, value kernel 42.8 -> 39.0 (Nsight Compute,
// B=64); the step 146-153 -> 141 µs at B=64 (back to back 133 -> 128), 462-464 -> 433-434 at
// B=256 (back to back 439 -> 419). Only the reads unrolled, 4 times: 42.2 and 40.8 µs; 2
// times: 44.3 and 41.8; 8 times: 43.8 and 42.7. H200, each build timed twice in one run.
constexpr int kPairUnroll = 4;

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
VarOrRVar unrolled(const VarOrRVar &v) { return unroll_part(v, "_ui"); }

void unroll_serial(Stage s, const VarOrRVar &v, int factor = kStepUnroll) {
  s.split(named_like(v, unqualified(v.name())), unroll_part(v, "_uo"), unrolled(v), factor, TailStrategy::GuardWithIf)
      .unroll(unrolled(v));
}

// g (a reduction) computed inside a thread of f's kernel, one value, in registers; its
// reduction loop unrolled, where `unroll`.
Func in_registers(Func g, const Func &f, const Var &thread, bool unroll = true, int factor = kStepUnroll) {
  g.compute_at(f, thread).store_in(MemoryType::Register);
  for (const Var &a : g.args()) g.bound_extent(a, 1);
  for (int u = 0; u < g.num_update_definitions() && unroll; ++u) unroll_serial(g.update(u), g.rvars(u)[0], factor);
  return g;
}

// `rows` (v, i, c, h, b), as `readers` read it, copied for one chunk into shared memory at
// loop `at` of f's kernel (a block): read from global memory once and in order. Its rows are
// padded to an odd length, so that threads each reading a row of their own (a token's sum)
// meet different banks. Each thread's loop over the chunk's tokens (a constant extent) is
// innermost and unrolled, so that its loads are in flight together; outermost, it was a loop
// over a run-time extent (the channels) around each token, one load in flight a thread.
// Measured on an H100 (B=8 T=4096 H=16 D=M=S=64, chunk 32, alternately in one run, two
// rounds, with the fused scans' whole-patch copies on both sides): IDA forward+backward 30.8
// / 30.9 -> 30.3 / 30.3 ms, BLA forward 3.40 / 3.42 -> 3.34 / 3.35, forward+backward 13.5 ->
// 13.3; IDA forward level (5.84 / 5.85 -> 5.84 / 5.89). Nsight Compute, forwards: BLA's
// softmax 257 -> 188 µs, IDA's features kt 250 -> 238 but vt 171 -> 192 and fq 160 -> 195
// (ptxas for sm_90 at 64 registers: fq's kernel 36 -> 64 registers a thread, vt's 60 -> 64).
// Returns the copy.
Func stage_chunk_rows(Func rows, const std::vector<Func> &readers, const Func &f, const Var &at, const CudaKnobs &k) {
  Func staged = rows.in(readers);
  const Var v = staged.args()[0];
  staged.compute_at(f, at).align_storage(v, 2 * kRowThreads + 1);
  const RowLoops l = row_threads(staged, v, vars().i, k.threads, rows.name() + "_staged");
  staged.reorder(l.yo, l.xo, l.xi, l.yi).unroll(l.yo);
  return staged;
}

// Whether f is a sum per token (i, c, h, b) over a vector of it (a norm, a dot product).
bool is_token_sum(const Func &f) {
  const Vars &v = vars();
  const std::vector<Var> a = f.args();
  return is_reduction(f) && a.size() == 4 && a[0].same_as(v.i) && a[1].same_as(v.c) && a[2].same_as(v.h) &&
         a[3].same_as(v.b);
}

// A sum per token as one kernel: a block per chunk, head and batch element, one thread per
// token summing in a register, over copies in shared memory (stage_chunk_rows) of the
// per-token vectors (v, i, c, h, b) that it reads. (As tiles, one thread per token reading
// its vectors from global memory, each warp read 32 rows 256 bytes apart: IDA's backward
// dot products took 1.5 ms each, B=8 T=4096 H=16 D=64 on the H200.)
void gpu_token_sum(Func f, const CudaKnobs &k) {
  const Vars &x = vars();
  Func host = f.in();
  const std::string p = f.name() + "_sum";
  Var io(p + "_io"), ii(p + "_ii");
  host.compute_root()
      .split(x.i, io, ii, kRowThreads, TailStrategy::GuardWithIf)
      .reorder(io, ii, x.c, x.h, x.b)
      .gpu_threads(ii)
      .gpu_blocks(x.c, x.h, x.b);
  in_registers(f, host, io, false);
  for (const auto &[name, fn] : Internal::find_direct_calls(f.function())) {
    Func g(fn);
    const std::vector<Var> a = g.args();
    if (name != f.name() && a.size() == 5 && a[1].same_as(x.i) && a[2].same_as(x.c)) {
      stage_chunk_rows(g, {f}, host, x.c, k);
    }
  }
}

// The unrolling of a real scan state's serial loop over the chunks (see gpu_root).
constexpr int kChunkUnroll = 4;

// Returns whether f became register tiles (of `kind`: see gpu_tiled_reduction).
bool gpu_root(Func f, const CudaKnobs &k, bool is_output, const TileKind &kind) {
  if (!is_output && is_token_sum(f)) {
    gpu_token_sum(f, k);
    return false;
  }
  if (!is_output && is_reduction(f) && tiles_within_chunks(f)) {
    gpu_tiled_reduction(f, k, kind);
    return true;
  }
  // Other reductions (per head or batch element: sums for the parameter gradients, norms)
  // accumulate in their own buffer, one thread per element.
  const int threads = k.threads;
  f.compute_root();
  const std::string p = f.name();
  if (!Internal::is_undef(f.values()[0])) gpu_stage(f, in_storage_order(f, pure_vars(f, -1)), threads, p + "_s0");
  for (int u = 0; u < f.num_update_definitions(); ++u) {
    gpu_stage(f.update(u), in_storage_order(f, pure_vars(f, u)), threads, p + "_s" + std::to_string(u + 1));
  }
  // A real scan state's serial update over the chunks (is_scan_state): its chunk loop
  // unrolled, so that each thread has several carries' loads in flight. BLA forward's two 225-227 -> 194-195 us; unrolled as well, the
  // complex (IDA) ones took 397-429 -> 482-491 us and keep their loop (Nsight Compute, H100,
  // B=8 T=4096 H=16 D=M=S=64, chunk 32).
  if (is_scan_state(f) && f.outputs() == 1) {
    unroll_serial(f.update(1), f.rvars(1)[0], kChunkUnroll);
  }
  return false;
}

// Whether a Func's name is one of `patterns`: names, or patterns with one '*', which matches
// any prefix or suffix. (Halide may append "$n" to a name.)
bool named_in(const std::string &name, const std::set<std::string> &patterns) {
  const std::string base = name.substr(0, name.find('$'));
  for (const std::string &pattern : patterns) {
    const size_t star = pattern.find('*');
    if (star == std::string::npos) {
      if (base == pattern) return true;
      continue;
    }
    const std::string head = pattern.substr(0, star), tail = pattern.substr(star + 1);
    if (base.size() >= head.size() + tail.size() && base.compare(0, head.size(), head) == 0 &&
        base.compare(base.size() - tail.size(), tail.size(), tail) == 0) {
      return true;
    }
  }
  return false;
}

// Every Func the outputs depend on, by name.
std::map<std::string, Func> pipeline_funcs(const std::vector<Func> &outputs) {
  std::map<std::string, Func> all;
  for (const Func &o : outputs) {
    for (const auto &[name, fn] : Internal::find_transitive_calls(o.function())) all.emplace(name, Func(fn));
  }
  return all;
}

// The whole pipeline on the GPU: every Func with an update definition, and every other Func
// not named in `inlined` (by name, or by a pattern with one '*'), computed at root as
// kernels. Inlined Funcs are pointwise views (chunked inputs, write weights, complex
// wrappers) whose values cost less to recompute than to store and load. Set
// FSATTN_LIST_STAGES=1 when building to print every stage and what it became.
// Funcs named in `scheduled` were given their schedule by the caller and are left as they are;
// those of them in `stored_by_caller` are computed at root (kernels of their own), and the
// register tiles may copy them as they copy the stages stored here (vector_tile_reduction).
// The register tiles are as `tiles` lists them (gpu_tiled_reduction, vector_tile_reduction).
struct TileLists {
  std::set<std::string> narrow;          // Halide's 64 registers (names or patterns, as `inlined`)
  std::set<std::string> large;           // large_tile × large_tile, where the variant has them
  std::set<std::string> complex_copies;  // copy their complex operands too
};
void schedule_pipeline_cuda(const std::vector<Func> &outputs, const std::set<std::string> &inlined,
                            const CudaKnobs &k, const std::set<std::string> &scheduled = {},
                            const std::set<std::string> &stored_by_caller = {}, const TileLists &tiles = {}) {
  const bool list = std::getenv("FSATTN_LIST_STAGES") != nullptr;
  std::set<std::string> stored = stored_by_caller;  // and the stages computed at root here, outputs aside
  std::vector<std::pair<Func, int>> tiled;  // those of them that became register tiles, and their size
  for (auto &[func_name, f] : pipeline_funcs(outputs)) {
    const std::string name = func_name;  // (a structured binding cannot be captured in C++17)
    const bool is_output = std::any_of(outputs.begin(), outputs.end(), [&](const Func &o) { return o.name() == name; });
    if (scheduled.count(name) != 0) {
      if (list) std::fprintf(stderr, "  stage %-28s %s\n", name.c_str(), "by its generator's schedule");
      continue;
    }
    const bool inline_it = !is_output && f.num_update_definitions() == 0 && named_in(name, inlined);
    if (list) std::fprintf(stderr, "  stage %-28s %s\n", name.c_str(),
                           inline_it ? "inline" : is_output ? "output" : is_reduction(f) && tiles_within_chunks(f) ? "tiles" : "root");
    if (inline_it) continue;
    TileKind kind{std::max(1, k.tile), kWideKernel};
    if (named_in(name, tiles.narrow)) {
      kind.budget = nullptr;
    } else if (k.large_tile > 0 && named_in(name, tiles.large)) {
      kind = {k.large_tile, kLargeKernel};
    }
    if (gpu_root(f, k, is_output, kind)) tiled.push_back({f, kind.size});
    if (!is_output) stored.insert(name);
  }
  // Once every stage has its schedule (which operands are stored is known):
  for (const auto &[f, tile] : tiled) {
    vector_tile_reduction(f, tile, stored, named_in(f.name(), tiles.complex_copies));
  }
}

// Pointwise views shared by every scan pipeline: the inputs' boundary conditions, the states
// as complex or real values, write weights and decay tables read through a lag or a
// wrapper; the inputs' own Funcs ("*_im") and boundary lambdas. The inputs viewed chunk by
// chunk (`chunked`) are not inlined but copied once, contiguous and zero-padded: read in
// place, every load of the register tiles paid for its clamps and select.
const std::set<std::string> kViews = {"*_im", "lambda_*", "repeat_edge*", "init_*", "write", "bla_write", "bla_decay_pow",
                                      "*_decay_lag", "*_qxd", "*_ud", "*_uw", "q_act", "k_act", "k_msq", "v_msq"};

std::set<std::string> with(std::set<std::string> base, std::initializer_list<std::string> more) {
  base.insert(more.begin(), more.end());
  return base;
}

// A sum over the call's tokens or chunks per element of a small result (a parameter
// gradient's terms per head and batch element, (m or r, h, b)) as partial sums: each update
// keeps one of its reduction loops as a dimension of an intermediate (rfactor), one thread
// per element of it, and then adds the intermediate's elements. The loop kept is the
// outermost (the chunks; a single loop over the call's tokens is first split into
// kPartialTokens-token pieces), or with `keep_innermost` the innermost, which then becomes
// the threads' innermost dimension: where it runs along the operands' contiguous dimension
// and f's own elements do not (IDA's end terms, over channels of states stored per mode), so
// that a warp's loads are consecutive. (One thread per element of f, each summing every
// token, is 8192 threads at B=8 H=16 D=M=64: on the H200, IDA's end terms took 2.39 ms each
// and its mode terms 1.72 ms, BLA's channel terms 0.99 ms each and its end terms 0.57 ms.)
constexpr int kPartialTokens = 64;
void partial_sums(Func f, bool keep_innermost, const CudaKnobs &k, std::set<std::string> &done) {
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

// A sum over the call's tokens per element of a state-sized result (m, m2, h, b: IDA's
// mixing gradient Γ) as partial sums: its token loop split into pieces of kPartialTokens
// tokens, each piece's sum an element of an intermediate (rfactor) along a dimension that
// the register tiles run in the grid (gpu_tiled_reduction: blocks over the patches and
// pieces, the heads and the batch elements), which f then adds. (As one register tile per
// head and batch element summing every token, Γ was 256 blocks of 128 threads on the H200's
// 132 SMs, and took 2.39 ms at B=8 T=4096 H=16 M=64; the pieces with the batch a loop in
// each thread, 1.06 ms; with the batch in the grid, 0.84 ms, Nsight Compute.)
void tiled_partial_sums(Func f) {
  const RVar token = f.rvars(0)[0];
  const RVar ro(f.name() + "_pieces"), ri(f.name() + "_within");
  f.update(0).split(token, ro, ri, kPartialTokens, TailStrategy::GuardWithIf).rfactor(ro, piece_of(f));
}

// A backward pass: its gradient outputs and the generator's batch-summed parameter gradients
// (the stages named in `scheduled` were given their schedules by the caller).
void schedule_backward_cuda(std::vector<Func> outputs, const std::vector<Func> &sums,
                            const std::set<std::string> &scheduled, const std::set<std::string> &stored,
                            const CudaKnobs &k, const TileLists &tiles, const std::set<std::string> &views = kViews) {
  outputs.insert(outputs.end(), sums.begin(), sums.end());
  schedule_pipeline_cuda(outputs, views, k, scheduled, stored, tiles);
}

// A per-token vector f(v, i, c, h, b) (a feature map, the softmax's weights) with its sums
// over v per token, `sums` (i, c, h, b: norms, the softmax's maximum and denominator), as one
// kernel: a block per chunk, head and batch element, which first copies `rows` (what the
// sums and f read, by `readers`) for its chunk into shared memory (stage_chunk_rows), then
// forms the sums, one thread per token, and f, 32 threads along v. (As kernels of their own,
// one thread per token, the sums read their rows 256 bytes apart in each warp: BLA's softmax
// maximum took 1.79 ms and IDA's norms 1.05 ms each, B=8 T=4096 H=16 D=S=64 on the H200.)
// The sums are computed inside f's kernel, so only f may read them (the backward passes,
// whose gradients read the norms too, take gpu_token_sum). Each thread accumulates its
// token's sum in a register, the loop unrolled (in_registers), then stores it for the block;
// accumulated in the block's shared copy, BLA's softmax took 280 us instead of 235, IDA's
// features kt, vt and fq 260, 180 and 160 us instead of 241, 164 and 150 (H200, B=8 T=4096
// H=16 D=S=M=64, Nsight Compute; on an H100, 292 -> 257, 266 -> 249, 184 -> 171, 168 -> 160).
void gpu_chunk_rows(Func f, const std::vector<Func> &sums, Func rows, const std::vector<Func> &readers,
                    const CudaKnobs &k, std::set<std::string> &done) {
  const Vars &x = vars();
  const std::string p = f.name() + "_rows";
  Var so(p + "_so"), si(p + "_si");
  f.compute_root();
  gpu_stage(f, f.args(), k.threads, p);  // (v, i, c, h, b): gpu_stage_tiled
  done.insert(stage_chunk_rows(rows, readers, f, x.c, k).name());
  for (Func s : sums) {
    Func shared = s.in();
    shared.compute_at(f, x.c).split(x.i, so, si, kRowThreads, TailStrategy::GuardWithIf).gpu_threads(si);
    in_registers(s, shared, si);
    done.insert(s.name());
  }
  done.insert(f.name());
}

// IDA's decay tables Λ_m^n (n, m, h), their rows of L + 1 powers padded to a multiple of 4
// floats. Measured on the H200 (B=8 T=4096 H=16 M=64, chunk 32): the key read within the
// chunk, which reads Λ at each pair's lag, took 1.09 ms instead of 1.52, and the read's sum
// of its parts (Λ at each token's age) 0.21 ms instead of 0.34; the forward 8.81 ms instead
// of 9.36.
void aligned_decay_rows(std::initializer_list<CxFunc *> tables) {
  for (CxFunc *t : tables) t->func().align_bounds(vars().n, kReductionStep);
}

// A scan's chunk states and carries stored mode-major (modes, or slots, innermost), for a
// reader that tiles along modes and sums over channels (the forwards' key read through the
// state, IDA's p_inter and BLA's z_inter): its operand then lies along the tile, which each
// thread reads as vectors (vector_tile_reduction) and a warp in one row per step, where
// stored channel-major each warp read 8 rows of the state per step. The carries' tiles store
// along modes too (gpu_tiled_reduction), and the state update runs along them
// (in_storage_order). Measured with Nsight Compute on the H200 (B=8 T=4096 H=16 D=M=S=64,
// chunk 32, 4×4 tiles): BLA's read 651 -> 334 µs (its carry 296 -> 316, the update 177 ->
// 181), IDA's 1550 -> 675 µs (carry 603 -> 657, update 303 -> 360). (Stored element by
// element, BLA's carry took 493 µs; with its threads along modes instead, 653 µs, and IDA's
// 1250 µs.)
void mode_major(ScanStages &scan, bool carry_stored = true) {
  const Vars &x = vars();
  scan.state.func().reorder_storage(x.m, x.r, x.c, x.h, x.b);
  if (carry_stored) scan.carry.func().in().reorder_storage(x.m, x.r, x.c, x.h, x.b);
}

// A chunked scan's carries formed inside its serial update, where they are used, instead of
// stored by a kernel of their own and read back: a block per patch of the state (its
// dimensions by kScanThreads threads each, each thread a kScanTile × kScanTile tile: a 32 × 32
// patch) and head and batch element runs the chunks in order; at each chunk it copies the
// chunk's written vectors and carry weights into shared memory, each thread sums its tile of
// the carry in registers from the copies, then writes its tile of the next state. The tile's
// rows are read and written as float4 vectors (the state's contiguous dimension padded to the
// patch): unrolled element by element instead, each element's load of the old state was
// issued after the previous element's store (the compiler cannot tell they do not alias), a
// chain of serial global round trips. Measured on an H100 (B=8 T=4096 H=16 D=M=64, chunk 32,
// 4×4 tiles, medians of two runs each): IDA forward 6.81 -> 6.39 ms, forward+backward 33.6 ->
// 31.8; element by element, 7.5 and 35.0. BLA's forward went 3.40 -> 3.74 ms with it (its
// carries' tiles read dz and π as vectors already), its backward 10.56 -> 10.36 (forward +
// backward less forward): BLA's forward keeps its stored carries.
//
// The patch: 8 × 8 threads. With 16 × 8 (a 64 × 32 patch, half as many blocks, each longer
// in its serial loop over the chunks), same H100 and shape, alternately in one run: IDA
// forward 6.38 against 6.04 ms, forward+backward 31.7 against 31.4; with 16 × 4 (64 × 16),
// 6.59 and 32.0.
//
// The carry's loop over the chunk's tokens unrolled 4 times, so that each thread issues the
// next tokens' shared loads while the multiply-adds of the last run: with 64 threads a block
// and one block per patch (512 blocks for IDA's 64 × 64 states at B=8 H=16), an SM holds
// about 8 warps, too few to hide a load's latency behind another warp's arithmetic (Nsight
// Compute on an H100, IDA's key scan: 1.9 warps a scheduler, an instruction issued every 3.3
// cycles). On an H200 (B=8 T=4096 H=16 D=M=64, chunk 32, alternately in one run, two rounds):
// IDA forward 5.84 -> 5.73 ms, forward+backward 29.4 -> 29.2, BLA forward+backward 12.8 ->
// 12.6; not kept from that run: the same at 255 registers (5.72, 29.2, 12.6: level), and
// unrolled twice at 255 (5.79, 29.2, 12.6). On an H100, the IDA forward's key scan 863 -> 813
// µs and its value scan 730 -> 670. Also on an H100, before: 2 × 2 tiles, 16 × 16 threads
// over 32 × 32 or 8 × 8 over 16 × 16 (four times the warps, each thread a quarter of the
// multiply-adds per shared load): the key scan 862 -> 1300 µs, IDA forward 6.05 -> 7.04 and
// 6.93 ms.
constexpr int kScanTile = 4, kScanThreads = 8, kScanTokenUnroll = 4;
bool fuses_scans(const CudaKnobs &k) { return k.tile >= kScanTile; }
void gpu_fused_scan(ScanStages &scan, const CudaKnobs &k, std::set<std::string> &done) {
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
  // Its operands (the written vectors x(r, i, ...), the weights coef(i, m, ...)) copied per
  // chunk into shared memory, the tile's dimension contiguous. Each copy spans a whole patch
  // (and the chunk's tokens), also where the patch passes the end of the state: its loops
  // then have constant extents and are unrolled, so each thread's loads are in flight
  // together; past the state's end the operands read zeros or clamped parameters, as the
  // register tiles' do (gpu_tiled_reduction). Clipped to the state, the loop over the rows
  // that a thread copies had a run-time extent, and its loads went out 4 at a time, a global
  // round trip each, every chunk. Measured on an H100 (B=8 T=4096 H=16 D=M=64, chunk 32,
  // alternately, two rounds, in each of two runs): IDA forward 5.93 -> 5.80 ms and 5.97 ->
  // 5.85, cuda_c64_r4 7.43 -> 7.23 and 7.47 -> 7.28, forward+backward 31.1 -> 30.9 and 31.0
  // -> 30.85, BLA forward+backward 13.5 either; Nsight Compute, the IDA forward's key scan
  // 813 -> 657 µs, its value scan 670 -> 690 (its copy with a run-time extent, the weights',
  // was 8 loads a step already). With the run-time loops unrolled instead, guarded: key scan
  // 695 µs, value scan 675, forward 5.81 ms.
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
std::set<std::string> fused_scans(std::initializer_list<ScanStages *> scans, const CudaKnobs &k,
                                  std::set<std::string> &done) {
  std::set<std::string> states;
  if (!fuses_scans(k)) return states;
  for (ScanStages *scan : scans) {
    gpu_fused_scan(*scan, k, done);
    states.insert(scan->state.func().name());
  }
  return states;
}

// The large tiles (gpu_tiled_reduction): the reads through the chunk states (*_inter) and
// the query's reads of the states (*_qx); BLA's products with π (*_e: IDA's lose) and its
// adjoint carries (its forward's carries lose).
const std::set<std::string> kIdaLargeTiles = {"*_inter", "*_qx"};
const TileLists kBlaForwardTiles = {{}, {"*_inter", "*_qx", "*_e"}, {}};
const TileLists kBlaBackwardTiles = {{}, with(kBlaForwardTiles.large, {"q_chunked_carry", "d_o_chunked_carry"}), {}};
// The IDA forward's register tiles kept at Halide's 64 registers (and 4×4) in the variants
// with wider budgets (gpu_tiled_reduction): its read through the mode-major key state
// (p_inter) and the scans' carries, whose operands are copied into registers. (As large
// tiles, each IDA carry took 0.70-0.72 -> 1.35 ms and the forward's p_inter 0.66 -> 0.87;
// H200, B=8 T=4096 H=16, Nsight Compute.) Its read within the chunk, summed over the lag
// (read_by_channels), copies its rows of the decay table (complex) as vectors: p_intra 577 ->
// 409 us, the lag and the copies together (H100, same shape, Nsight Compute). Its mixing w
// copies its complex operands too: 778 -> 625 us (H100; at 64 registers, before the wide
// budgets, the copies had made it slower, 1.08 -> 1.94 ms on the H200).
const TileLists kIdaForwardTiles = {{"p_inter", "*_carry"}, kIdaLargeTiles, {"p_intra", "w"}};
// IDA's backward reads through its chunk states stored channel-major (the forward's key
// states, the value states, the adjoints): the reads by channels copy their complex
// operands (vector_tile_reduction), and its p_inter, which spills at 64 registers (ptxas for
// sm_90: 288 bytes), is not narrow (1.58 -> 1.40 ms at 128 registers, then 1.21 with the
// copies; H200, B=8 T=4096 H=16 D=M=64, Nsight Compute). Its forward reads by channels within
// the chunk, summed over the lag (read_by_channels: p_intra, gw_intra), copy their rows of
// the decay table as vectors, and its mixings w and w2 copy their complex operands, as the
// forward's do.
const TileLists kIdaBackwardTiles = {
    {"*_carry"}, kIdaLargeTiles, {"hk_inter", "hv_inter", "gw_inter", "p_inter", "p_intra", "gw_intra", "w", "w2"}};

}  // namespace

void schedule_ida_forward_cuda(IdaForwardStages &s, const CudaKnobs &k) {
  // The feature maps fq, kt, vt are stored, each with its norm (gpu_chunk_rows): the chunked
  // inputs are read once each. The register tiles copy them too (vector_tile_reduction:
  // p_qx 0.42 -> 0.34 ms, H200, B=8 T=4096 H=16). The value read's sum of its two parts is
  // formed where the output is written (stored, it was a 0.37 ms kernel of its own, same).
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
  schedule_pipeline_cuda({s.o, s.state_k_out, s.state_v_out}, with(kViews, {"*_chunked", "o_out"}), k, done, stored,
                         kIdaForwardTiles);
}

void schedule_ida_backward_cuda(IdaBackwardStages &s, const std::vector<Func> &sums, const CudaKnobs &k) {
  aligned_decay_rows({&s.fwd.modes.decay_pow, &s.conj_decay});
  tiled_partial_sums(s.gram_grad.func());
  std::set<std::string> done;
  partial_sums(s.end_terms.func(), true, k, done);
  for (Func f : {s.mode_terms.func(), s.d_b.func(), s.d_gk, s.d_bk, s.d_gv, s.d_bv}) partial_sums(f, false, k, done);
  const std::set<std::string> states = fused_scans({&s.fwd.key_scan, &s.fwd.value_scan, &s.key_adj, &s.value_adj}, k, done);
  schedule_backward_cuda({s.dq, s.dk, s.dv, s.d_state_k_in, s.d_state_v_in}, sums, done, states, k, kIdaBackwardTiles);
}

void schedule_bla_forward_cuda(BlaForwardStages &s, const CudaKnobs &k) {
  // The two reads' sums of their parts (z and o) are formed where they are used: stored,
  // each was a 0.4 ms kernel of its own (H200, B=8 T=4096 H=16). The softmax is one kernel
  // (gpu_chunk_rows), its exponentials formed where they are used; the register tiles copy
  // its weights π (o_e 0.42 -> 0.33 ms, H200, B=8 T=4096 H=16).
  std::set<std::string> done;
  BlaSoftmax &sm = s.softmax;
  gpu_chunk_rows(sm.pi.func(), {sm.zmax, sm.den}, s.z.out.func(), {sm.zmax, sm.ez}, k, done);
  mode_major(s.key_scan);  // (its carries stored: see gpu_fused_scan)
  schedule_pipeline_cuda({s.o, s.state_k_out, s.state_v_out}, with(kViews, {"o_out", "z_out", "ez"}), k, done,
                         {sm.pi.func().name()}, kBlaForwardTiles);
}

void schedule_bla_backward_cuda(BlaBackwardStages &s, const std::vector<Func> &sums, const CudaKnobs &k) {
  std::set<std::string> done;
  for (Func f : {s.k_terms, s.v_terms, s.k_end_terms, s.v_end_terms, s.slot_terms}) partial_sums(f, false, k, done);
  // The adjoint scans' carry weights (γ^age dz and γ^age π, per batch element) are formed
  // inside their carries' register tiles, which read dz and π as vectors along the tile's
  // slots. Stored, each was a kernel of its own over (token, slot, chunk, head, batch), one
  // thread per element: 0.31 ms each, 0.8 TB/s (H200, B=8 T=4096 H=16 S=64, Nsight Compute).
  const std::set<std::string> states = fused_scans({&s.fwd.key_scan, &s.fwd.value_scan, &s.key_adj, &s.value_adj}, k, done);
  schedule_backward_cuda({s.dq, s.dk, s.dv, s.d_state_k_in, s.d_state_v_in}, sums, done, states, k,
                         kBlaBackwardTiles, with(kViews, {s.key_adj.coef.func().name(), s.value_adj.coef.func().name()}));
}

// ---- decoding steps ---------------------------------------------------------------------
// A step is bound by its states, each read and written once at best, and by its launches
// (a few µs each: with every stage a kernel of its own, 21 for IDA and 16 for BLA, the steps
// took 107 and 68 µs at B=1, H=32, D=M=S=64, and 317 and 214 µs at B=64, on the H200). So
// each state is one kernel that reads the old state, reduces it with the token's query and
// writes the new one, fused with compute_with:
//   - the key state (IDA's p = Xk fq, BLA's z = Ks q, sums over the contiguous channels): each
//     thread kStepLanes channels apart along one mode's row, keeping its partial sum of the
//     row (the reads of consecutive threads are consecutive), then writing the new elements
//     it has just read. 47 µs for IDA's key state, 25 µs for BLA's (whose loops are
//     unrolled: 31 µs rolled), at B=64 (H200);
//   - the value state (the output, a sum over modes or slots): each thread one channel,
//     summing in a register, then writing that channel's new elements. IDA's threads each
//     take every fourth mode and keep a partial sum, which a small kernel adds (42 µs for
//     the value state); BLA's take every slot, reading the softmax's exponentials from the
//     kernel that also adds z's partial sums, and summing their denominator (23 µs; 34 µs
//     when each thread formed the maximum and the exponentials itself, twice per slot). Why
//     each: gpu_value_state_partials.
// The new state (Λ X + B x, γ X + φ x) is formed where it is used, from the old state; each
// thread reads the elements it writes before it writes them, so the update may be in place.
// The features (IDA's three as one kernel), the norms and the mixing are small kernels, their
// sums in registers. IDA is 7 kernels, BLA 4 (IDA's three features fused: B=1 63.9 -> 48.4
// µs, B=64 162 -> 157 µs, H200). (IDA's p, cp = C p and w = C^T cp in one kernel per head and
// sequence, p and cp in shared memory, took 29 µs instead of 27 as three. Through G = C^T C
// formed per call, w = G p: G's kernel, a thread per element, took 16.9 µs at H=32 M=64,
// bound by L1 (86%), and the step 154-161 µs at B=64 against 156, H200. Slower too, each
// measured in docs/performance.md (CUDA decode steps): the old state copied into shared memory per block;
// cp and w over 8 sequences a block; each state read once, its write and its read's sums as
// two reductions over one domain fused by compute_with.) The whole step as one kernel is the
// other variant (fused steps, below).

namespace {

// Partial sums of a key state's read per mode: 8 of them, so that 16 modes × 8 channels
// make a block of 128 threads, each thread reading Dk/8 complex values of one row. (With 4
// or 16, IDA's per-state step took 163-170 or 159-160 µs at B=64 against 149-152, BLA's
// 79-80 or 101-102 against 71-75; H200, one run. Again once IDA's pairs were vector loads,
// unrolled 4 times: its key kernel 43.5 µs with 4, 52.1 with 16, against 40.4 with 8; Nsight
// Compute at B=64, H200.)
constexpr int kStepLanes = 8;

// f(v, ...) (a per-token vector: a feature map, a read of the state, φ) as one kernel:
// blocks over 64 values of v and over the head and sequence, where f has them, one value
// per thread; f's token dimensions (extent 1) loops inside the thread. Not fused into one
// thread index: Halide 14 bounds what a thread reads through the divisions that recover
// the dimensions by their whole ranges, and a value computed inside the thread (a norm) was
// then given a buffer in global memory sized by a host loop over every thread. Returns the
// thread loop.
Var step_block(const Func &f) { return Var(f.args()[0].name() + "_o"); }  // f's blocks along v
int step_threads(const CudaKnobs &k) { return std::min(64, k.threads); }   // along v, per block
Var gpu_step_kernel(Func f, const CudaKnobs &k) {
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
Var gpu_step_block_copy(Func g, const Func &f, const CudaKnobs &k) {
  Var so("so"), si("si");
  g.compute_at(f, step_block(f))
      .store_in(MemoryType::GPUShared)
      .split(g.args()[0], so, si, step_threads(k), TailStrategy::GuardWithIf)
      .gpu_threads(si);
  return si;
}

// A reduction f(v, h, b) read by a step kernel `reader`, formed once per block of it into
// shared memory, each thread summing one element in a register (reader reads the copy).
void gpu_step_block_sum(Func f, const Func &reader, const CudaKnobs &k, std::set<std::string> &done) {
  Func rows = f.in();
  in_registers(f, rows, gpu_step_block_copy(rows, reader, k));
  done.insert({rows.name(), f.name()});
}

// A reduction f(v, h, b) stored by a wrapper, one kernel: each thread one element, summed in
// a register. f's consumers read the wrapper, which is returned.
Func gpu_step_sum(Func f, const CudaKnobs &k, std::set<std::string> &done) {
  Func stored = f.in();
  in_registers(f, stored, gpu_step_kernel(stored, k));
  done.insert(stored.name());
  done.insert(f.name());
  return stored;
}

// A complex state's old elements as its new state's write reads them: `state` (ri, r, m, h,
// b), the state as the new state reads it (the input, or its clamped view), and `write`, the
// new state as inlined into the state's output (step.h gives the token's read a new state
// of its own). The write gets its own copy of each old (re, im) pair in registers, one 8-byte
// vector load (the generator states the strides and alignment that make it one), and stores
// the new pair as one vector. Empty for real states. `read`, where given, is the token's read
// of the new state, whose partial sums get their own pair copies likewise. Halide 14 bounds
// those copies by the sums' whole lanes, not by their guards, so `state` must then be a view
// clamped along channels and modes (else the reads pass the state's end at odd shapes). Only
// the key state's read is paired: its kernel 45.9 -> 43.8 µs, the step 148 -> 141 µs at B=64
// (back to back 137 -> 133), 458 -> 455 at B=256 (H200, Nsight Compute and two timed runs);
// the value state's, clamped along modes too, was slower (42.8 -> 43.9 µs; 39.0 -> 40.6 with
// the loops unrolled, kPairUnroll).
struct StatePairs {
  Func state, write, read;
  bool complex() const { return state.defined(); }
};

// state.in(user) in registers at `at`: one element's (re, im) pair, loaded as one vector.
void pair_copy(Func state, const Func &user, const LoopLevel &at, std::set<std::string> &done) {
  Func pair = state.in(user);
  pair.compute_at(at).store_in(MemoryType::Register);
  const std::vector<Var> a = pair.args();
  pair.bound(a[0], 0, 2).vectorize(a[0]);
  for (size_t j = 1; j < a.size(); ++j) pair.bound_extent(a[j], 1);
  done.insert(pair.name());
}

// The key state's kernel: `out` (ri, r, m, h, b) or (r, m, h, b), and the read f(m, h, b)
// summing over channels r, split into kStepLanes partial sums (channels kStepLanes apart)
// by rfactor. Blocks of 16 modes of one head and sequence; f, which adds the partial sums,
// is the caller's to schedule.
void gpu_key_state(Func out, const StatePairs &pairs, Func f, const CudaKnobs &k, std::set<std::string> &done) {
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
void gpu_value_state_whole(Func out, bool complex, Func o, const std::vector<Func> &in_thread, const CudaKnobs &k,
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
// apart, in blocks of kValueChannels channels × kValueGroups groups: kValueGroups times the
// threads of gpu_value_state_whole, which, at B·H·Dv threads, fill half the GPU at B=64
// H=32. (IDA's value kernel: 42 µs, instead of 62 with one thread per channel. BLA's took 35
// µs instead of 36, but its threads each summed the softmax's maximum over every slot first,
// and the output's kernel, summing the maximum and the denominator again, 12 µs: BLA keeps
// gpu_value_state_whole, with the exponentials formed by a kernel of their own. B=64, H200.
// With IDA's pairs as vector loads, unrolled 4 times: its value kernel 43.0 µs with 2 groups,
// 42.4 with 8, against 39.0 with 4.)
constexpr int kValueGroups = 4;
constexpr int kValueChannels = 32;

// The value state's kernel as partial sums: `out` (ri, r, m, h, b) or (r, m, h, b), and the
// partial sums of f(r, h, t, b), the output's sum over modes, split by rfactor; each thread
// writes the new elements it has just read. The output o is a small kernel of its own that
// adds the partial sums.
void gpu_value_state_partials(Func out, const StatePairs &pairs, Func o, Func f, const CudaKnobs &k,
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
  out.split(x.r, ro, rv, kValueChannels, TailStrategy::GuardWithIf).split(x.m, ms, u, kValueGroups, TailStrategy::GuardWithIf);
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
// thread sums over the token's channels: `x`, what the norm sums over (silu of q or k, or
// v), is formed once per block into shared memory. (Formed by every thread, the features
// took 18-20 µs each at B=64 H=32 Dk=64, H200.)
void gpu_step_feature(Func f, Func norm, Func x, const CudaKnobs &k, std::set<std::string> &done) {
  const Var thread = gpu_step_kernel(f, k);
  done.insert(f.name());
  done.insert(in_registers(norm, f, thread).name());
  Func staged = x.in(norm);
  gpu_step_block_copy(staged, f, k);
  done.insert(staged.name());
}

// Pointwise views of the steps, formed where they are used: the new states, the inputs'
// clamped views and the features' chunked inputs.
const std::set<std::string> kStepViews = with(kViews, {"state_k_new", "state_v_new", "state_k_read", "state_v_read",
                                                       "*_clamped", "*_chunked"});

}  // namespace

namespace {

// ---- fused steps: the whole step one kernel, a block per head and sequence ----------------
// The block runs the step in phases, each a loop over the block's threads, which Halide
// separates by barriers: Λ or φ, the features (IDA), the key state's read by the query
// (kBlockLanes partial sums along the channels, then their sum), the slot transform (IDA's
// mixing, BLA's softmax), the value state's read (partial sums over kValueGroups groups of
// modes), and last both new states, each thread writing the elements it reads (the old
// states again: the block read them moments before, so they come from L2). Every element of
// a state is read only by the block that writes it, and before it is written, so the update
// may be in place. In every phase the thread loop is outermost in the block and the
// thread's own loops inside it (a serial loop around a thread loop costs a barrier per
// iteration), and every phase is one-dimensional (Halide sizes the block by the largest
// thread loop of each dimension over the phases). Values a thread sums in registers are
// computed inside its innermost loop, under the guard of the split that made the thread
// loop: Halide bounds what they read by that guard (computed at the thread loop, outside it,
// they read past the inputs: threads past the modes read C's columns up to 255).
//
// H200, H=32 D=M=S=64, 256 threads: one launch instead of 4 (BLA) or 9 (IDA), so at B=1 the
// steps take 17 µs instead of 33 (BLA) and 29 instead of 49 (IDA). At B=64 BLA's takes 61 µs
// (54 back to back) against 74 for the kernels per state; IDA's 183 against 158 (153 against
// 160 in a later run, once a thread wrote both parts of a complex element: block_state_writes),
// so IDA keeps both (the tuning table picks by batch). Nsight Compute on BLA's at B=64: 51 µs,
// 2.1 TB/s (44% of DRAM's peak), 64 registers a thread so 50% occupancy (4 blocks of 8
// warps per SM, 3.9 waves), an instruction issued every 1.9 cycles per scheduler: bound by
// latency and by instructions (every load and store forms its 64-bit address). Capping the
// registers lower (HL_CUDA_JIT_MAX_REGISTERS 32, 40, 48) spilled and ran slower (BLA 102,
// 79, 73 µs); 512 threads a block, 92 µs; unrolling 16 rather than 8, no faster.
// Writing each new state in the phase that reads the old one (no second read) would need
// the read's partial sums and the state fused at the thread's loop (compute_with), but the
// partial sums are consumed by later phases, and Halide 14 fuses only stages that do not
// depend on each other.
constexpr int kBlockLanes = 4;  // partial sums per value of the reads along channels or modes
struct StepBlock {
  Func root;    // the output o(r, h, t, b), whose (h, b) loop is the block
  int threads;  // per block: a multiple of 64
  int unroll;   // of the threads' loops over the states (more loads in flight, more registers)
};

// The block: o's (h, b), its channels 64 threads a step; `in_thread` (o's sums) in registers.
StepBlock step_block_root(Func o, const std::vector<Func> &in_thread, const CudaKnobs &k,
                          std::set<std::string> &done) {
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
void block_lanes(Func f, int lanes, bool lanes_first, int unroll, const StepBlock &blk,
                 std::set<std::string> &done) {
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

// The new states `outs` (r, m, h, b) or, complex, (ri, r, m, h, b) (`pairs`: each state's
// old elements and new state, StatePairs), written in the block after the output (compute_with), a phase
// each: threads over 64 channels × the rest of the block in modes, each thread a loop over
// its modes, unrolled blk.unroll times. (The two states' loops fused into one phase,
// compute_with at the thread loop, made Halide 14 fail with an internal error in
// ScheduleFunctions.)
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

void schedule_bla_step_cuda_fused(BlaStepStages &s, const CudaKnobs &k) {
  std::set<std::string> done;
  const StepBlock blk = step_block_root(s.o, {s.o_sum, s.den}, k, done);
  block_vector(s.writes.phi, blk, done);  // φ of the token at every slot (rotors in double)
  block_lanes(s.z, kBlockLanes, true, blk.unroll, blk, done);  // z's partial sums
  block_sum(s.z, blk, done);                            // z
  done.insert(in_registers(s.zmax, s.ez, block_vector(s.ez, blk, done)).name());  // exponentials
  block_lanes(s.o_sum, kValueGroups, false, blk.unroll, blk, done);  // the output's partial sums
  block_state_writes({s.state_k_out, s.state_v_out}, blk, done);
  schedule_pipeline_cuda({s.o, s.state_k_out, s.state_v_out},
                         with(kStepViews, {"gamma_pow", "token_rotor", "anchor_rotor"}), k, done);
}

void schedule_ida_step_cuda_fused(IdaStepStages &s, const CudaKnobs &k) {
  std::set<std::string> done;
  const StepBlock blk = step_block_root(s.o, {s.o_sum}, k, done);
  block_vector(s.modes.decay_pow.func(), blk, done, &vars().m);  // Λ of every mode
  // The features, each from a copy in shared memory of what its norm sums over.
  IdaFeatures &f = s.feat;
  for (auto [feature, norm, x] : {std::tuple(f.fq, f.q_ssq, f.q_act), std::tuple(f.kt, f.k_ssq, f.k_act),
                                  std::tuple(f.vt, f.v_ssq, f.v)}) {
    Func staged = x.in({norm, feature});
    block_vector(staged, blk, done);
    done.insert(in_registers(norm, feature, block_vector(feature, blk, done)).name());
  }
  block_lanes(s.p.func(), kBlockLanes, true, blk.unroll, blk, done);  // p's partial sums
  block_sum(s.p.func(), blk, done);                            // p = Xk fq
  // cp = C p and w = C^T cp, each in lanes along its sum, so that a thread waits on M / 4
  // of C's elements, not M.
  for (Func g : {s.cp.func(), s.w.func()}) {
    block_lanes(g, kBlockLanes, true, blk.unroll, blk, done);
    block_sum(g, blk, done);
  }
  block_lanes(s.o_sum, kValueGroups, false, blk.unroll, blk, done);  // the output's partial sums
  std::map<std::string, Func> funcs = pipeline_funcs({s.o});
  block_state_writes({s.state_k_out, s.state_v_out}, blk, done,
                     {{funcs.at("state_k_im"), s.key_new.func()}, {funcs.at("state_v_im"), s.value_new.func()}});
  schedule_pipeline_cuda({s.o, s.state_k_out, s.state_v_out}, kStepViews, k, done);
}

}  // namespace

void schedule_ida_step_cuda(IdaStepStages &s, const CudaKnobs &k) {
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
  std::map<std::string, Func> funcs = pipeline_funcs({s.o});
  gpu_key_state(s.state_k_out, {funcs.at("state_k_im_clamped"), s.key_new.func(), s.key_read.func()}, s.p.func(), k,
                done);
  // cp = C p reads C along its rows, which consecutive threads (modes) would read 2M floats
  // apart: a copy of each head's C stored transposed makes their reads consecutive (cp: 73 ->
  // 15 µs, the copy 4 µs, at B=64 on the H200).
  // The copy and Λ (decay_pow, here only its first power), both from the parameters alone,
  // are one kernel: each a loop over one index (the three loops of each fused; the copy's
  // (re, im) pair inside the thread), Λ's fused (compute_with) with the copy's at its block
  // loop, which compute_with needs to be named alike in both: Λ's first loop takes the name
  // of the copy's. (Two kernels took 4.3 and 4.6 µs, one 5.9 µs: the step 41.2 -> 36.6 µs at
  // B=1, 148 -> 144 µs at B=64; H200, two runs of each.)
  Func c_rows = funcs.at("c_mix_im").in(s.cp.func());
  const std::vector<Var> a = c_rows.args();  // (part, col, row, h)
  c_rows.compute_root().reorder_storage(a[0], a[2], a[1], a[3]).bound(a[0], 0, 2).reorder(a[0], a[2], a[1], a[3]).unroll(a[0]);
  gpu_stage(c_rows, {a[2], a[1], a[3]}, k.threads, "params");
  Func decay = s.modes.decay_pow.func();
  const std::vector<Var> d = decay.args();  // (n, m, h)
  decay.compute_root().rename(d[0], a[2]);
  gpu_stage(decay, {a[2], d[1], d[2]}, k.threads, "params");
  decay.compute_with(c_rows, gpu_stage_block("params"));
  done.insert({c_rows.name(), decay.name()});
  // p: each block of cp's kernel first adds the key kernel's partial sums for its head and
  // sequence into shared memory. (As a kernel of its own, p took 5.3 µs at B=64, H200. p, cp
  // and w as one kernel in the one-kernel step's phases, 256 threads per head and sequence,
  // cp and w each as 4 partial sums reading C in place: 32.9 µs against 11.3 + 10.4, the step
  // 149-153 µs against 138-142 at B=64; H200, two runs.)
  gpu_step_block_sum(s.p.func(), gpu_step_sum(s.cp.func(), k, done), k, done);
  // cp loads each (re, im) pair of C's copy as one 8-byte vector (the copy is the pipeline's
  // own buffer, so Halide knows its alignment): cp 11.1 -> 10.5 µs at B=64 (Nsight Compute,
  // H200). w, reading C itself, would need C stated 8-byte aligned, which the runtime would
  // then have to require of the caller's C: w 10.6 -> 9.5 µs, the step 1-2% faster; not done.
  Func cp_f = s.cp.func();
  pair_copy(c_rows, cp_f, LoopLevel(cp_f, unrolled(cp_f.rvars(0)[0])), done);
  gpu_step_sum(s.w.func(), k, done);
  gpu_value_state_partials(s.state_v_out, {funcs.at("state_v_im_clamped"), s.value_new.func()}, s.o, s.o_sum, k, done);
  schedule_pipeline_cuda({s.o, s.state_k_out, s.state_v_out}, kStepViews, k, done);
}

void schedule_bla_step_cuda(BlaStepStages &s, const CudaKnobs &k) {
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
  // sums into z for every slot of its head and sequence, in shared memory, then each thread
  // takes the maximum over them and forms its slot's exponential. (z as a kernel of its own
  // took 4.0 µs and the exponentials 4.8; together 4.6 µs, B=64 H=32 S=64, H200.)
  const Var ez_thread = gpu_step_kernel(s.ez, k);
  gpu_step_block_sum(s.z, s.ez, k, done);
  in_registers(s.zmax, s.ez, ez_thread);
  done.insert({s.ez.name(), s.zmax.name()});
  gpu_value_state_whole(s.state_v_out, false, s.o, {s.o_sum, s.den}, k, done);
  schedule_pipeline_cuda({s.o, s.state_k_out, s.state_v_out},
                         with(kStepViews, {"gamma_pow", "token_rotor", "anchor_rotor"}), k, done);
}

void schedule_bla_interpolate_cuda(DirichletInterpolation &d, const CudaKnobs &k) {
  schedule_pipeline_cuda({d.out}, kViews, k);
}

void schedule_gradient_sum_cuda(Func sum, const CudaKnobs &k) {
  schedule_pipeline_cuda({sum}, {}, k);
}

}  // namespace fsattn
