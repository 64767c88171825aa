// A whole pipeline as CUDA kernels: every stage with an update definition and every stage
// not listed as a pointwise view computed at root, reductions as register tiles where they can
// be, per-token sums and vectors as one kernel a chunk. Set FSATTN_LIST_STAGES=1 when building
// to print each stage and what it became.
#include "internal.h"

#include "schedules/register_budget.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

using namespace Halide;

namespace fsattn::cuda_schedule {

// `rows` (v, i, c, h, b), as `readers` read it, copied for one chunk into shared memory at
// loop `at` of f's kernel: read from global memory once and in order. Rows are padded to an
// odd length so that threads reading a row each meet different banks, and each thread's loop
// over the chunk's tokens is innermost and unrolled (its loads in flight together).
Func stage_chunk_rows(Func rows, const std::vector<Func> &readers, const Func &f, const Var &at, const Knobs &k) {
  Func staged = rows.in(readers);
  const Var v = staged.args()[0];
  staged.compute_at(f, at).align_storage(v, 2 * kRowThreads + 1);
  const RowLoops l = row_threads(staged, v, vars().i, k.threads, rows.name() + "_staged");
  staged.reorder(l.yo, l.xo, l.xi, l.yi).unroll(l.yo);
  return staged;
}

namespace {

// Whether f is a sum per token (i, c, h, b) over a vector of it (a norm, a dot product).
bool is_token_sum(const Func &f) {
  const Vars &v = vars();
  const std::vector<Var> a = f.args();
  return is_reduction(f) && a.size() == 4 && a[0].same_as(v.i) && a[1].same_as(v.c) && a[2].same_as(v.h) &&
         a[3].same_as(v.b);
}

// A sum per token as one kernel: a block per chunk, head and batch element, one thread per
// token summing in a register, over shared copies (stage_chunk_rows) of the vectors it reads
// (read from global memory, each warp read 32 rows 256 bytes apart).
void gpu_token_sum(Func f, const Knobs &k) {
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
bool gpu_root(Func f, const Knobs &k, bool is_output, const TileKind &kind) {
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
  // A real scan state's serial update over the chunks: its loop unrolled, so that each
  // thread has several carries' loads in flight (the complex ones keep their loop: slower so).
  if (is_scan_state(f) && f.outputs() == 1) {
    unroll_serial(f.update(1), f.rvars(1)[0], kChunkUnroll);
  }
  return false;
}

}  // namespace

namespace {

// Whether `name` matches a pattern with one '*' (any prefix or suffix), Halide's "$n" suffix
// of a repeated name aside.
bool matches(const std::string &name, const std::string &pattern) {
  const std::string base = name.substr(0, name.find('$'));
  const size_t star = pattern.find('*');
  const std::string head = pattern.substr(0, star), tail = pattern.substr(star + 1);
  return base.size() >= head.size() + tail.size() && base.compare(0, head.size(), head) == 0 &&
         base.compare(base.size() - tail.size(), tail.size(), tail) == 0;
}

// Whether f is an input's own Func, which Halide defines as a read of the input buffer.
bool is_input_wrapper(const Func &f) {
  if (f.num_update_definitions() != 0 || f.outputs() != 1) return false;
  const Internal::Call *call = f.value().as<Internal::Call>();
  return call != nullptr && call->call_type == Internal::Call::Image;
}

}  // namespace

StageSet &StageSet::add(std::initializer_list<Func> funcs) {
  for (const Func &f : funcs) names_.insert(f.name());
  return *this;
}

StageSet &StageSet::add(const StageSet &other) {
  names_.insert(other.names_.begin(), other.names_.end());
  patterns_.insert(other.patterns_.begin(), other.patterns_.end());
  inputs_ = inputs_ || other.inputs_;
  return *this;
}

StageSet &StageSet::inputs() {
  inputs_ = true;
  return *this;
}

// BoundaryConditions::repeat_edge names its Func "repeat_edge" and wraps a buffer in a
// "lambda_<n>" Func.
StageSet &StageSet::boundary_conditions() {
  patterns_.insert({"repeat_edge*", "lambda_*"});
  return *this;
}

bool StageSet::contains(const Func &f) const {
  if (names_.count(f.name()) != 0 || (inputs_ && is_input_wrapper(f))) return true;
  return std::any_of(patterns_.begin(), patterns_.end(), [&](const std::string &p) { return matches(f.name(), p); });
}

void StageSet::check(const std::map<std::string, Func> &pipeline, const char *role) const {
  for (const std::string &name : names_) {
    if (pipeline.count(name) == 0) {
      throw CompileError(std::string("CUDA schedule: ") + role + " names " + name + ", not a stage of the pipeline");
    }
  }
  for (const std::string &p : patterns_) {
    if (std::none_of(pipeline.begin(), pipeline.end(), [&](const auto &f) { return matches(f.first, p); })) {
      throw CompileError(std::string("CUDA schedule: ") + role + "' pattern " + p +
                         " matches no stage of the pipeline");
    }
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

// Inlined Funcs are pointwise views (chunked inputs, write weights, complex wrappers) that
// cost less to recompute than to store and load. Funcs in `scheduled` were scheduled by the
// caller; those in `stored_by_caller` are computed at root there, and the register tiles may
// copy them as they copy the stages stored here (vector_tile_reduction).
void schedule_pipeline_cuda(const std::vector<Func> &outputs, const StageSet &inlined, const Knobs &k,
                            const std::set<std::string> &scheduled, const std::set<std::string> &stored_by_caller,
                            const TileLists &tiles) {
  const bool list = std::getenv("FSATTN_LIST_STAGES") != nullptr;
  const std::map<std::string, Func> funcs = pipeline_funcs(outputs);
  inlined.check(funcs, "the inlined views");
  tiles.narrow.check(funcs, "the narrow tiles");
  tiles.large.check(funcs, "the large tiles");
  tiles.complex_copies.check(funcs, "the tiles copying complex operands");
  std::set<std::string> stored = stored_by_caller;  // and the stages computed at root here, outputs aside
  std::vector<std::pair<Func, int>> tiled;          // those of them that became register tiles, and their size
  for (const auto &[func_name, f] : funcs) {
    const std::string name = func_name;  // (a structured binding cannot be captured in C++17)
    const bool is_output = std::any_of(outputs.begin(), outputs.end(), [&](const Func &o) { return o.name() == name; });
    if (scheduled.count(name) != 0) {
      if (list) std::fprintf(stderr, "  stage %-28s %s\n", name.c_str(), "by its generator's schedule");
      continue;
    }
    const bool inline_it = !is_output && f.num_update_definitions() == 0 && inlined.contains(f);
    if (list)
      std::fprintf(stderr, "  stage %-28s %s\n", name.c_str(),
                   inline_it                                   ? "inline"
                   : is_output                                 ? "output"
                   : is_reduction(f) && tiles_within_chunks(f) ? "tiles"
                                                               : "root");
    if (inline_it) continue;
    TileKind kind{std::max(1, k.gpu_tile), kWideKernel};
    if (tiles.narrow.contains(f)) {
      kind.budget = nullptr;
    } else if (k.large_tile > 0 && tiles.large.contains(f)) {
      kind = {k.large_tile, kLargeKernel};
    }
    if (gpu_root(f, k, is_output, kind)) tiled.push_back({f, kind.size});
    if (!is_output) stored.insert(name);
  }
  // Once every stage has its schedule (which operands are stored is known):
  for (const auto &[f, tile] : tiled) {
    vector_tile_reduction(f, tile, stored, tiles.complex_copies.contains(f));
  }
}

// A per-token vector f(v, i, c, h, b) (a feature map, the softmax's weights) with its
// per-token sums `sums` (norms, the softmax's maximum and denominator) as one kernel: a block
// per chunk, head and batch element copies `rows` into shared memory (stage_chunk_rows), forms
// the sums (a thread per token, in a register) and then f. Only f may read the sums.
void gpu_chunk_rows(Func f, const std::vector<Func> &sums, Func rows, const std::vector<Func> &readers, const Knobs &k,
                    std::set<std::string> &done) {
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

}  // namespace fsattn::cuda_schedule
