#include "cuda.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>

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

// One definition of a Func as one kernel: every pure loop fused into one (innermost first,
// so that consecutive threads write consecutive elements), `threads` per block; its
// reduction loops, if any, run serially inside each thread.
// Returns the thread loop (undefined for a single-thread kernel).
Var gpu_stage(Stage s, const std::vector<Var> &pure, int threads, const std::string &prefix) {
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
  Var block(prefix + "_blk"), thread(prefix + "_thr");
  s.gpu_tile(fused, block, thread, threads, TailStrategy::GuardWithIf);
  return thread;
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

// A plain reduction f(x, y, ...) (not an output) as register tiles: a block of threads
// covers a (16 tile) × (threads/16 tile) patch of (x, y), each thread a tile × tile piece of
// it, accumulated in registers over the whole reduction (each step loads tile values of each
// operand for tile² multiply-adds), then stored once to a wrapper of f that every consumer
// reads. (Accumulating in f's own buffer, each step would load and store it in global
// memory, and its initial value would be a kernel of its own.) tile = 1: one element per
// thread.
//
// The blocks run over the patches (x) and the first two of the chunks, heads and batch
// elements (y, z); any other dimension is a loop inside each block (for the scans' stages,
// the batch: the per-token reductions, which have no state dimension, put it in the grid; as
// a loop, BLA's softmax max and sum took 0.6 ms each on 32 blocks, H200, B=8 T=4096 H=16). Fused into one block index, the chunk, head
// and batch of a thread are divisions and remainders by symbolic extents, whose bounds Halide
// 14 widens to the whole range: each thread's tile then spans every chunk, goes to a
// global-memory buffer instead of registers, and that buffer's 32-bit index overflowed at
// IDA B=8, T=4096, H=16 (CUDA_ERROR_ILLEGAL_ADDRESS on the H200). A grid dimension y or z
// holds at most 65535 blocks: the runtime refuses more chunks, heads or batch elements
// (check_cuda_grid).
void gpu_tiled_reduction(Func f, const CudaKnobs &k) {
  Func stored = f.in();
  const std::vector<Var> a = stored.args();
  const std::string p = f.name() + "_in";
  const int R = std::max(1, k.tile), TX = 16, TY = std::max(1, k.threads / 16);
  const Var &x = a[0], &y = a[1];
  Var xo(p + "_xo"), xi(p + "_xi"), yo(p + "_yo"), yi(p + "_yi"), tx(p + "_tx"), ty(p + "_ty"), rx(p + "_rx"),
      ry(p + "_ry"), patch(p + "_patch");
  stored.compute_root()
      .split(x, xo, xi, TX * R, TailStrategy::GuardWithIf)
      .split(y, yo, yi, TY * R, TailStrategy::GuardWithIf)
      .split(xi, tx, rx, R)
      .split(yi, ty, ry, R);
  const Vars &v = vars();
  // Grid dimensions y and z: the first two of chunk, head, batch that f has.
  std::vector<VarOrRVar> serial, blocks{patch};
  for (size_t j = 2; j < a.size(); ++j) {
    const std::string n = a[j].name();
    const bool grid = n == v.c.name() || n == v.h.name() || n == v.b.name();
    (grid && blocks.size() < 3 ? blocks : serial).push_back(a[j]);
  }
  std::vector<VarOrRVar> order{rx, ry, tx, ty};
  order.insert(order.end(), serial.begin(), serial.end());
  order.push_back(xo);
  order.push_back(yo);
  order.insert(order.end(), blocks.begin() + 1, blocks.end());
  stored.reorder(order).fuse(xo, yo, patch);
  if (blocks.size() == 1) stored.gpu_blocks(blocks[0]);
  if (blocks.size() == 2) stored.gpu_blocks(blocks[0], blocks[1]);
  if (blocks.size() == 3) stored.gpu_blocks(blocks[0], blocks[1], blocks[2]);
  stored.gpu_threads(tx, ty).unroll(rx).unroll(ry);
  // The tile is computed whole, also where the region a consumer needs is clipped (the last
  // chunk, a clamped index): registers need a constant size. Past the true sizes the stages
  // read zeros through `chunked`, and parameters and states through clamped indices.
  f.compute_at(stored, tx).bound_extent(x, R).bound_extent(y, R).unroll(x).unroll(y);
  for (size_t j = 2; j < a.size(); ++j) f.bound_extent(f.args()[j], 1);
  for (int u = 0; u < f.num_update_definitions(); ++u) {
    std::vector<VarOrRVar> dims{x, y};
    for (const RVar &r : f.rvars(u)) dims.push_back(r);
    for (size_t j = 2; j < a.size(); ++j) dims.push_back(f.args()[j]);
    f.update(u).reorder(dims).unroll(x).unroll(y);
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

void gpu_root(Func f, const CudaKnobs &k, bool is_output) {
  if (!is_output && is_reduction(f) && tiles_within_chunks(f)) {
    gpu_tiled_reduction(f, k);
    return;
  }
  // Other reductions (per head or batch element: sums for the parameter gradients, norms)
  // accumulate in their own buffer, one thread per element.
  const int threads = k.threads;
  f.compute_root();
  const std::string p = f.name();
  if (!Internal::is_undef(f.values()[0])) gpu_stage(f, pure_vars(f, -1), threads, p + "_s0");
  for (int u = 0; u < f.num_update_definitions(); ++u) {
    gpu_stage(f.update(u), pure_vars(f, u), threads, p + "_s" + std::to_string(u + 1));
  }
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
// Funcs named in `scheduled` were given their schedule by the caller and are left as they are.
void schedule_pipeline_cuda(const std::vector<Func> &outputs, const std::set<std::string> &inlined,
                            const CudaKnobs &k, const std::set<std::string> &scheduled = {}) {
  const bool list = std::getenv("FSATTN_LIST_STAGES") != nullptr;
  auto is_inlined = [&](const std::string &name) {
    // Halide may append "$n" to a name; '*' matches any prefix or suffix.
    const std::string base = name.substr(0, name.find('$'));
    for (const std::string &pattern : inlined) {
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
  };
  for (auto &[func_name, f] : pipeline_funcs(outputs)) {
    const std::string name = func_name;  // (a structured binding cannot be captured in C++17)
    const bool is_output = std::any_of(outputs.begin(), outputs.end(), [&](const Func &o) { return o.name() == name; });
    if (scheduled.count(name) != 0) {
      if (list) std::fprintf(stderr, "  stage %-28s %s\n", name.c_str(), "by its generator's schedule");
      continue;
    }
    const bool inline_it = !is_output && f.num_update_definitions() == 0 && is_inlined(name);
    if (list) std::fprintf(stderr, "  stage %-28s %s\n", name.c_str(),
                           inline_it ? "inline" : is_output ? "output" : is_reduction(f) && tiles_within_chunks(f) ? "tiles" : "root");
    if (!inline_it) gpu_root(f, k, is_output);
  }
}

// Pointwise views shared by every scan pipeline: the inputs' boundary conditions, the states
// as complex or real values, write weights and decay tables read through a lag or a
// wrapper; the inputs' own Funcs ("*_im") and boundary lambdas. The inputs viewed chunk by
// chunk (`chunked`) are not inlined but copied once, contiguous and zero-padded: read in
// place, every load of the register tiles paid for its clamps and select.
const std::set<std::string> kViews = {"*_im", "lambda_*", "repeat_edge*", "init_*", "write", "bla_write", "bla_decay_pow",
                                      "*_decay_lag", "*_qxd", "*_ud", "*_uw", "q_act", "k_act", "k_msq"};

std::set<std::string> with(std::set<std::string> base, std::initializer_list<std::string> more) {
  base.insert(more.begin(), more.end());
  return base;
}

// A backward pass: its gradient outputs and the generator's batch-summed parameter gradients.
void schedule_backward_cuda(std::vector<Func> outputs, const std::vector<Func> &sums, const CudaKnobs &k) {
  outputs.insert(outputs.end(), sums.begin(), sums.end());
  schedule_pipeline_cuda(outputs, kViews, k);
}

}  // namespace

void schedule_ida_forward_cuda(IdaForwardStages &s, const CudaKnobs &k) {
  // The feature maps fq, kt, vt are stored already: the chunked inputs are read once each.
  // The value read's sum of its two parts is formed where the output is written (stored, it
  // was a 0.37 ms kernel of its own, H200, B=8 T=4096 H=16).
  schedule_pipeline_cuda({s.o, s.state_k_out, s.state_v_out}, with(kViews, {"*_chunked", "o_out"}), k);
}

void schedule_ida_backward_cuda(IdaBackwardStages &s, const std::vector<Func> &sums, const CudaKnobs &k) {
  schedule_backward_cuda({s.dq, s.dk, s.dv, s.d_state_k_in, s.d_state_v_in}, sums, k);
}

void schedule_bla_forward_cuda(BlaForwardStages &s, const CudaKnobs &k) {
  // The two reads' sums of their parts (z and o) are formed where they are used: stored,
  // each was a 0.4 ms kernel of its own (H200, B=8 T=4096 H=16).
  schedule_pipeline_cuda({s.o, s.state_k_out, s.state_v_out}, with(kViews, {"o_out", "z_out"}), k);
}

void schedule_bla_backward_cuda(BlaBackwardStages &s, const std::vector<Func> &sums, const CudaKnobs &k) {
  schedule_backward_cuda({s.dq, s.dk, s.dv, s.d_state_k_in, s.d_state_v_in}, sums, k);
}

// ---- decoding steps ---------------------------------------------------------------------
// A step is bound by its states: each is read and written once at best. The new state
// (Λ X + B x, γ X + φ x) is not stored: it is formed where it is used, by the kernel that
// writes the state out and by the two reads (IDA's p = Xk fq, BLA's z = Ks q; the output's
// sum over slots), which read the old state. (Stored, it cost a write and a read of each
// state more: IDA's step at B=64 H=32 D=M=64 took 840 µs, BLA's 433 µs, on the H200.) The
// reads run before the state is written (o is the first output), so the update may be in
// place.

namespace {

// A state-shaped output f(ri, r, m, h, b) (complex) or f(r, m, h, b): each thread one (r, m)
// element, both parts of a complex one; consecutive threads consecutive channels (coalesced);
// blocks over (r, m) of one head and sequence, the heads and sequences grid dimensions y, z
// (at most 65535 each: check_cuda_grid).
void gpu_state_stage(Func f, bool complex, const CudaKnobs &k) {
  const Vars &x = vars();
  Var rm("rm"), rmo("rmo"), rmi("rmi");
  f.compute_root();
  // (Both parts as one float2, vectorized: 58 µs instead of 52 µs per state at B=64, H200.)
  if (complex) f.bound(x.ri, 0, 2).reorder(x.ri, x.r, x.m, x.h, x.b).unroll(x.ri);
  f.fuse(x.r, x.m, rm).split(rm, rmo, rmi, k.threads, TailStrategy::GuardWithIf).gpu_blocks(rmo, x.h, x.b).gpu_threads(rmi);
}

// A reduction f(v, h, b) or f(v, h, t, b) (t of extent 1) of a step: each thread one v,
// summing serially; a block holds up to 64 of them for one head and sequence.
void gpu_step_reduction(Func f, const Var &v, const CudaKnobs &k) {
  const Vars &x = vars();
  const bool has_t = f.args().size() == 4;
  const int threads = std::min(64, k.threads);
  Var vo(v.name() + "_o"), vi(v.name() + "_i"), tb("tb");
  f.compute_root();
  if (has_t) f.bound(x.t, 0, 1);
  for (int u = -1; u < f.num_update_definitions(); ++u) {
    Stage st = u < 0 ? Stage(f) : f.update(u);
    st.split(v, vo, vi, threads, TailStrategy::GuardWithIf);
    if (has_t) {
      st.fuse(x.t, x.b, tb).gpu_blocks(vo, x.h, tb);
    } else {
      st.gpu_blocks(vo, x.h, x.b);
    }
    st.gpu_threads(vi);
  }
}

}  // namespace

void schedule_ida_step_cuda(IdaStepStages &s, const CudaKnobs &k) {
  const Vars &x = vars();
  gpu_state_stage(s.state_k_out, true, k);
  gpu_state_stage(s.state_v_out, true, k);
  // p = Xk fq: consecutive threads (modes) read a state row apart, 73 µs at B=64 on the H200
  // (split into 16 partial sums over interleaved channels with rfactor, so that consecutive
  // threads read consecutive channels, it took 82 µs).
  gpu_step_reduction(s.p.func(), x.m, k);
  gpu_step_reduction(s.o, x.r, k);
  // cp = C p reads C along its rows, which consecutive threads (modes) would read 2M floats
  // apart: a copy of each head's C stored transposed makes their reads consecutive (cp: 73 ->
  // 15 µs, the copy 4 µs, at B=64 on the H200).
  Func c_rows = pipeline_funcs({s.o}).at("c_mix_im").in(s.cp.func());
  const std::vector<Var> a = c_rows.args();  // (part, col, row, h)
  c_rows.compute_root().reorder_storage(a[0], a[2], a[1], a[3]);
  gpu_stage(c_rows, {a[0], a[2], a[1], a[3]}, k.threads, "c_rows");
  schedule_pipeline_cuda({s.o, s.state_k_out, s.state_v_out}, with(kViews, {"state_k_new", "state_v_new"}), k,
                         {s.o.name(), s.state_k_out.name(), s.state_v_out.name(), s.p.func().name(), c_rows.name()});
}

void schedule_bla_step_cuda(BlaStepStages &s, const CudaKnobs &k) {
  const Vars &x = vars();
  gpu_state_stage(s.state_k_out, false, k);
  gpu_state_stage(s.state_v_out, false, k);
  gpu_step_reduction(s.z, x.m, k);  // 40 µs at B=64 (H200), as many with rfactor (see p above)
  gpu_step_reduction(s.o_sum, x.r, k);
  schedule_pipeline_cuda({s.o, s.state_k_out, s.state_v_out}, with(kViews, {"state_k_new", "state_v_new"}), k,
                         {s.state_k_out.name(), s.state_v_out.name(), s.z.name(), s.o_sum.name()});
}

void schedule_bla_interpolate_cuda(DirichletInterpolation &d, const CudaKnobs &k) {
  schedule_pipeline_cuda({d.out}, kViews, k);
}

void schedule_gradient_sum_cuda(Func sum, const CudaKnobs &k) {
  schedule_pipeline_cuda({sum}, {}, k);
}

}  // namespace fsattn
