// fsattn-bench: every compiled variant of every kernel, CPU and CUDA, on the shapes of
// docs/performance.md. Reports time, tokens/s and GFLOP/s (flops.h gives the count); CUDA kernels also
// GB/s and the fractions of the H200's measured ceilings. CUDA benchmarks are registered
// only where a GPU is present. The calls themselves are op_calls.h's, as fsattn-tune's.
#include "flops.h"
#include "op_calls.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

using namespace fsattn;
using namespace fsattn::bench;

namespace {

int chunk_of(const std::string &variant) {
  size_t at = variant.rfind("_c");
  return at == std::string::npos ? 32 : std::atoi(variant.c_str() + at + 2);
}

bool is_ida(fsattn_op op) {
  return op == FSATTN_OP_IDA_FORWARD || op == FSATTN_OP_IDA_BACKWARD || op == FSATTN_OP_IDA_STEP;
}

// The flops of one call of op (a forward or backward scan) at shape s with chunk length L.
double flops(fsattn_op op, const OpShape &s, int L) {
  const double M = double(s.features), Dk = double(s.dk), Dv = double(s.dv);
  double per_token = 0;
  switch (op) {
    case FSATTN_OP_IDA_FORWARD: per_token = ida_forward_flops_per_token(M, Dk, Dv, L); break;
    case FSATTN_OP_IDA_BACKWARD: per_token = ida_backward_flops_per_token(M, Dk, Dv, L); break;
    case FSATTN_OP_BLA_FORWARD: per_token = bla_forward_flops_per_token(M, Dk, Dv, L); break;
    case FSATTN_OP_BLA_BACKWARD: per_token = bla_backward_flops_per_token(M, Dk, Dv, L); break;
    default: break;
  }
  return double(s.batch * s.seqlen * s.heads) * per_token;
}

// Bytes a pass must move at least: each activation read once, each output written once
// (forward: q, k, v in, o out; backward: q, k, v, d_o in, dq, dk, dv out). A step moves its
// states in and out.
double min_bytes(fsattn_op op, const OpShape &s) {
  const double activation = double(s.batch * s.seqlen * s.heads * s.dk) * sizeof(float);
  if (op == FSATTN_OP_IDA_STEP || op == FSATTN_OP_BLA_STEP) {
    const double complex = is_ida(op) ? 2.0 : 1.0;
    return 2.0 * double(s.batch * s.heads * s.features * (s.dk + s.dv)) * complex * sizeof(float);
  }
  return activation * (op == FSATTN_OP_IDA_FORWARD || op == FSATTN_OP_BLA_FORWARD ? 4 : 7);
}

void set_rates(benchmark::State &state, const OpShape &s, double flop, double bytes) {
  using C = benchmark::Counter;
  state.counters["tokens/s"] = C(double(s.batch * s.seqlen), C::kIsIterationInvariantRate);
  if (flop > 0) state.counters["GFLOP/s"] = C(flop * 1e-9, C::kIsIterationInvariantRate);
  state.counters["GB/s"] = C(bytes * 1e-9, C::kIsIterationInvariantRate);
}

// One op on the CPU: wall time of repeated calls.
void cpu_op(benchmark::State &state, fsattn_op op, std::string variant, OpShape s) {
  auto call = prepare(op, FSATTN_DEVICE_CPU, variant.empty() ? nullptr : variant.c_str(), s);
  for (auto _ : state) {
    if (call->run() != FSATTN_OK) {
      state.SkipWithError(fsattn_last_error());
      return;
    }
  }
  set_rates(state, s, flops(op, s, chunk_of(variant)), min_bytes(op, s));
}

// The CPU benchmark shape: B=2, T=2048, H=4, Dk=Dv=64, 64 modes or slots.
const OpShape kCpuShape{2, 2048, 4, 64, 64, 64};
// The decode steps' shape: H=32, Dk=Dv=64, M=S=64, B sequences.
OpShape step_shape(int64_t B) { return {B, 1, 32, 64, 64, 64}; }

#ifdef FSATTN_BENCH_CUDA
// ---- CUDA ----------------------------------------------------------------------------------
// Each benchmark warms up (module load and PTX compilation, workspace allocation), then times
// kGpuRuns calls one by one with CUDA events on the default stream and reports their median
// as the iteration time. Ceilings measured on the H200: 4.27 TB/s device-to-device
// copy, about 60 TFLOP/s fp32.
constexpr int kGpuRuns = 25;
constexpr double kGpuBytesPerSecond = 4.27e12, kGpuFlopsPerSecond = 60e12;

// The CUDA variants of an op: every one, or (all = false) the hand schedules only.
std::vector<std::string> cuda_variants(fsattn_op op, bool all = true) {
  return test::variants(op, FSATTN_DEVICE_CUDA, all ? test::Schedules::kAll : test::Schedules::kHand);
}

// The ops of a CUDA benchmark: a forward, or (with_backward) a forward then a backward, as a
// training step runs them. The backward writes the initial states' gradients over the
// forward's final states (the autoscheduled builds need every output whole).
// `variant` names the last op's variant; an earlier op runs the variant of that name where it
// has one, else the tuning table's pick (the backwards' 2×2-tile variants have no forward).
void cuda_ops(benchmark::State &state, std::vector<fsattn_op> ops, std::string variant, OpShape s) {
  std::vector<std::unique_ptr<PreparedCall>> calls;
  double flop = 0, bytes = 0;
  for (fsattn_op op : ops) {
    bool has = false;
    for (const std::string &name : cuda_variants(op)) has |= name == variant;
    calls.push_back(prepare(op, FSATTN_DEVICE_CUDA, has ? variant.c_str() : nullptr, s));
    flop += flops(op, s, chunk_of(variant));
    bytes += min_bytes(op, s);
  }
  auto run = [&] {
    fsattn_status st = FSATTN_OK;
    for (auto &c : calls) {
      if (st == FSATTN_OK) st = c->run();
    }
    return st;
  };
  double host_ms = 0, pipelined_ms = 0;
  const bool step = ops.size() == 1 && (ops[0] == FSATTN_OP_IDA_STEP || ops[0] == FSATTN_OP_BLA_STEP);
  for (auto _ : state) {
    fsattn_status status = FSATTN_OK;
    const double ms = median_ms(FSATTN_DEVICE_CUDA, run, kGpuRuns, 3, &status, &host_ms);
    if (status == FSATTN_OK && step) pipelined_ms = back_to_back_ms(run, kGpuRuns, 5, &status);
    if (status != FSATTN_OK) {
      state.SkipWithError(fsattn_last_error());
      return;
    }
    state.SetIterationTime(ms * 1e-3);
  }
  using C = benchmark::Counter;
  // The host's time inside the call (validation, launches), and for the steps the time per
  // step when steps are queued back to back (a decoding loop), which hides the host's part.
  state.counters["host_us"] = host_ms * 1e3;
  if (step) state.counters["back_to_back_us"] = pipelined_ms * 1e3;
  set_rates(state, s, flop, bytes);
  // Fractions of the ceilings, from the per-iteration rates divided by them.
  if (flop > 0) state.counters["of_fp32_peak"] = C(flop / kGpuFlopsPerSecond, C::kIsIterationInvariantRate);
  state.counters["of_copy_bw"] = C(bytes / kGpuBytesPerSecond, C::kIsIterationInvariantRate);
}

// The CUDA benchmark shape: B=8, T=4096, H=16, Dk=Dv=64, 64 modes or slots (BLA: M=31, W=256).
const OpShape kGpuShape{8, 4096, 16, 64, 64, 64};

benchmark::internal::Benchmark *register_cuda(const std::string &name, std::vector<fsattn_op> ops,
                                              const std::string &variant, const OpShape &s) {
  return benchmark::RegisterBenchmark(name.c_str(), cuda_ops, ops, variant, s)
      ->Unit(benchmark::kMillisecond)
      ->UseManualTime()
      ->Iterations(1);
}

// The four scan benchmarks at one shape, for every CUDA variant (all = false: the hand
// schedules only); `suffix` ends each name.
void register_cuda_at(const std::string &suffix, const OpShape &s, bool all) {
  struct Bench {
    const char *name;
    std::vector<fsattn_op> ops;
  };
  for (const Bench &b : {Bench{"ida_forward", {FSATTN_OP_IDA_FORWARD}},
                         Bench{"ida_forward+backward", {FSATTN_OP_IDA_FORWARD, FSATTN_OP_IDA_BACKWARD}},
                         Bench{"bla_forward", {FSATTN_OP_BLA_FORWARD}},
                         Bench{"bla_forward+backward", {FSATTN_OP_BLA_FORWARD, FSATTN_OP_BLA_BACKWARD}}}) {
    // A forward+backward benchmark runs each of the backward's variants.
    for (const std::string &v : cuda_variants(b.ops.back(), all)) {
      register_cuda(std::string(b.name) + "/cuda/" + v + suffix, b.ops, v, s);
    }
  }
}

// Time against sequence length T from 1K to 64K, with the batch B = max(1, 32768 / T) so
// that each call holds the same number of tokens up to 32K (H=16, D=64, 64 modes or slots;
// the default variants): where the fixed-state mixers overtake quadratic attention
// (bench/peer_gpu.py --seqlens times SDPA at the same shapes; bench/plot.py draws both).
void register_cuda_seqlen() {
  for (int64_t T = 1024; T <= 65536; T *= 2) {
    const OpShape s{std::max<int64_t>(1, 32768 / T), T, 16, 64, 64, 64};
    const std::string suffix = "/T=" + std::to_string(T);
    register_cuda("ida_forward/cuda/seqlen" + suffix, {FSATTN_OP_IDA_FORWARD}, "", s);
    register_cuda("bla_forward/cuda/seqlen" + suffix, {FSATTN_OP_BLA_FORWARD}, "", s);
    register_cuda("ida_forward+backward/cuda/seqlen" + suffix, {FSATTN_OP_IDA_FORWARD, FSATTN_OP_IDA_BACKWARD}, "", s);
    register_cuda("bla_forward+backward/cuda/seqlen" + suffix, {FSATTN_OP_BLA_FORWARD, FSATTN_OP_BLA_BACKWARD}, "", s);
  }
}

void register_all_cuda() {
  if (test::gpu() == nullptr) return;
  // Every CUDA variant, the Li2018 builds included, at the shape the baselines are built for
  // (the CPU benchmark's); the hand schedules at the CUDA benchmark shape, which they refuse.
  register_cuda_at("/B=2,T=2048,H=4", kCpuShape, true);
  register_cuda_at("", kGpuShape, false);
  register_cuda_seqlen();
  // The decoding steps, every variant, against the batch.
  for (auto [op, name] : {std::pair(FSATTN_OP_IDA_STEP, "ida_step"), std::pair(FSATTN_OP_BLA_STEP, "bla_step")}) {
    for (const std::string &v : cuda_variants(op, false)) {
      for (int64_t B : {1, 4, 16, 64, 256}) {
        register_cuda(std::string(name) + "/" + v + "/B=" + std::to_string(B), {op}, v, step_shape(B))
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
}
#endif

int register_all() {
  auto add = [](const std::string &name, fsattn_op op, const std::string &variant, const OpShape &s) {
    return benchmark::RegisterBenchmark(name.c_str(), cpu_op, op, variant, s)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->MinTime(1.0);
  };
  for (fsattn_op op : {FSATTN_OP_IDA_FORWARD, FSATTN_OP_IDA_BACKWARD, FSATTN_OP_BLA_FORWARD, FSATTN_OP_BLA_BACKWARD}) {
    const char *name = op == FSATTN_OP_IDA_FORWARD    ? "ida_forward"
                       : op == FSATTN_OP_IDA_BACKWARD ? "ida_backward"
                       : op == FSATTN_OP_BLA_FORWARD  ? "bla_forward"
                                                      : "bla_backward";
    for (const std::string &v : test::cpu_variants(op)) add(std::string(name) + "/cpu/" + v, op, v, kCpuShape);
  }
  for (int64_t B : {1, 4, 16, 64, 256}) {
    const std::string batch = "/B=" + std::to_string(B);
    add("ida_step/cpu" + batch, FSATTN_OP_IDA_STEP, "", step_shape(B))->Unit(benchmark::kMicrosecond);
    add("bla_step/cpu" + batch, FSATTN_OP_BLA_STEP, "", step_shape(B))->Unit(benchmark::kMicrosecond);
  }
#ifdef FSATTN_BENCH_CUDA
  register_all_cuda();
#endif
  return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
