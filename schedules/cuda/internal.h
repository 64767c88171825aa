// What the CUDA schedule files share: loop helpers and kernel placement (loops.cpp), register
// tiles and partial sums (tiles.cpp), the walk that turns a whole pipeline into kernels
// (pipeline.cpp), and the state pairs of the decoding steps (steps.cpp). The ops' schedules
// are in scans.cpp (the chunked passes), steps.cpp and fused_steps.cpp (decoding steps).
#pragma once

#include "Halide.h"
#include "schedules/cuda.h"

#include <map>
#include <set>
#include <string>
#include <vector>

namespace fsattn::cuda_schedule {

using Halide::Func;
using Halide::RVar;
using Halide::Stage;
using Halide::Var;
using Halide::VarOrRVar;

// ---- loops and kernels (loops.cpp) -------------------------------------------------------

constexpr int kRowThreads = 32;  // threads along a per-token vector (one warp)
constexpr int kStepUnroll = 8;   // unrolling of a serial loop inside a thread (unroll_serial)
constexpr int kPairUnroll = 4;   // the IDA step's loops over complex (re, im) pairs

// The pure loop variables of one definition of f (-1: the pure definition).
std::vector<Var> pure_vars(const Func &f, int update);
// A loop made by a split is named "<old>.<new>": its last part.
std::string unqualified(const std::string &loop);
// The reduction loops of f's update u by the names the scheduling calls accept.
std::vector<RVar> loop_rvars(const Func &f, int u);
// vs (f's pure loop variables) in the order of f's storage, innermost first.
std::vector<Var> in_storage_order(const Func &f, std::vector<Var> vs);
// The argument of f stored innermost.
size_t contiguous_dim(const Func &f);

// A stage tiled by row_threads: thread loops xi, yi and, inside each thread, xo, yo.
struct RowLoops {
  Var xo, xi, yo, yi;
};
RowLoops row_threads(Stage s, const Var &x, const Var &y, int threads, const std::string &prefix);

// One definition of a Func as one kernel; returns its thread loop. gpu_stage_block(prefix)
// names the block loop where the stage's loops were fused into one.
Var gpu_stage_block(const std::string &prefix);
Var gpu_stage(Stage s, const std::vector<Var> &pure, int threads, const std::string &prefix);
// Blocks over 1 to 3 loops of s, innermost first (grid x, y, z).
void gpu_grid(Stage s, const std::vector<VarOrRVar> &blocks);

bool is_reduction(const Func &f);   // a pure initial value, then updates folding into it
bool is_scan_state(const Func &f);  // a chunked scan's state (undefined value, two updates)
Var piece_of(const Func &f);        // the dimension that tiled_partial_sums adds
bool is_piece(const Var &v);

// v's unrolled part after unroll_serial; unroll_serial splits a serial loop by `factor`.
VarOrRVar unrolled(const VarOrRVar &v);
void unroll_serial(Stage s, const VarOrRVar &v, int factor = kStepUnroll);
// g (a reduction) inside a thread of f's kernel, one value in registers.
Func in_registers(Func g, const Func &f, const Var &thread, bool unroll = true, int factor = kStepUnroll);

// ---- register tiles and partial sums (tiles.cpp) -------------------------------------------

constexpr int kReductionStep = 4;   // a tile's reduction step; operand rows aligned to it
constexpr int kPartialTokens = 64;  // tokens per piece of a sum over the call's tokens

// A tile's size and its register budget: a kernel-name marker of register_budget.h, or null
// for Halide's 64 registers (a narrow tile).
struct TileKind {
  int size;
  const char *budget;
};
void gpu_tiled_reduction(Func f, const Knobs &k, const TileKind &kind);
// The tile's reduction stepped, its operands in `stored_stages` copied as vectors.
void vector_tile_reduction(Func f, int tile, const std::set<std::string> &stored_stages, bool complex_operands);
// Whether f's first two dimensions are ones a tile may run past (within a chunk or a state).
bool tiles_within_chunks(const Func &f);
// A sum over tokens or chunks per element of a small result, as partial sums.
void partial_sums(Func f, bool keep_innermost, const Knobs &k, std::set<std::string> &done);
// A sum over tokens per element of a state-sized result, in pieces the tiles run in the grid.
void tiled_partial_sums(Func f);

// ---- the whole pipeline (pipeline.cpp) --------------------------------------------------

// Stages of a pipeline named by their Funcs (handles from the algorithms' stage structs), and
// the Funcs that Halide makes itself, which no algorithm holds: each input's wrapper (found by
// its definition, a read of the input buffer) and a boundary condition's Funcs (by a pattern
// with one '*'). check() fails the generator, so the build, where a handle is not a stage of
// the pipeline or a pattern matches none: renaming a stage cannot silently change a schedule.
class StageSet {
 public:
  StageSet() = default;
  StageSet(std::initializer_list<Func> funcs) { add(funcs); }
  StageSet &add(std::initializer_list<Func> funcs);
  StageSet &add(const StageSet &other);
  StageSet &inputs();               // every input's wrapper
  StageSet &boundary_conditions();  // repeat_edge's Funcs
  bool contains(const Func &f) const;
  void check(const std::map<std::string, Func> &pipeline, const char *role) const;

 private:
  std::set<std::string> names_, patterns_;
  bool inputs_ = false;
};

// The register tiles that keep Halide's 64 registers, those that are large (where the variant
// has large tiles), and those that copy their complex operands too.
struct TileLists {
  StageSet narrow, large, complex_copies;
};
// Every Func the outputs depend on, by name.
std::map<std::string, Func> pipeline_funcs(const std::vector<Func> &outputs);
// Every stage not `inlined` and not `scheduled` by the caller computed at root as kernels.
void schedule_pipeline_cuda(const std::vector<Func> &outputs, const StageSet &inlined, const Knobs &k,
                            const std::set<std::string> &scheduled = {},
                            const std::set<std::string> &stored_by_caller = {}, const TileLists &tiles = {});
// `rows` copied for one chunk into shared memory at loop `at` of f's kernel.
Func stage_chunk_rows(Func rows, const std::vector<Func> &readers, const Func &f, const Var &at, const Knobs &k);
// A per-token vector f with its per-token sums as one kernel, a block per chunk.
void gpu_chunk_rows(Func f, const std::vector<Func> &sums, Func rows, const std::vector<Func> &readers, const Knobs &k,
                    std::set<std::string> &done);

// ---- decoding steps (steps.cpp, fused_steps.cpp) ------------------------------------------

constexpr int kValueGroups = 4;  // partial sums of the value state's read, over modes

// A complex state's old elements as its new state's write (and the token's read) use them,
// each (re, im) pair loaded as one vector; empty for real states.
struct StatePairs {
  Func state, write, read;
  bool complex() const { return state.defined(); }
};
void pair_copy(Func state, const Func &user, const Halide::LoopLevel &at, std::set<std::string> &done);

// The steps' pointwise views (steps.cpp).
StageSet step_views(const IdaStepStages &s);
StageSet step_views(const BlaStepStages &s);

void schedule_ida_step_cuda_fused(IdaStepStages &s, const Knobs &k);
void schedule_bla_step_cuda_fused(BlaStepStages &s, const Knobs &k);

}  // namespace fsattn::cuda_schedule
