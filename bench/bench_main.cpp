// fsattn-bench: every compiled variant of every kernel, CPU and CUDA, on the shapes of the
// issues. Reports time, tokens/s and GFLOP/s (flops.h gives the count); CUDA kernels also
// GB/s and the fractions of the H200's measured ceilings. CUDA benchmarks are registered
// only where a GPU is present.
#include "flops.h"
#include "test_util.h"

#ifdef FSATTN_BENCH_CUDA
#include "gpu/device_calls.h"
#endif

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <string>

using namespace fsattn;
using namespace fsattn::test;

namespace {

int chunk_of(const std::string &variant) {
  size_t at = variant.rfind("_c");
  return at == std::string::npos ? 32 : std::atoi(variant.c_str() + at + 2);
}

// Times run(case) and reports tokens/s and GFLOP/s (flops_per_token per token and head).
template <typename Case, typename Run>
void time_call(benchmark::State &state, const Case &c, Run run, double flops_per_token) {
  for (auto _ : state) {
    if (run(c) != FSATTN_OK) {
      state.SkipWithError(fsattn_last_error());
      break;
    }
  }
  const auto &s = c.s;
  state.counters["tokens/s"] = benchmark::Counter(double(s.B * s.T), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(double(s.B * s.T * s.H) * flops_per_token * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void ida_forward(benchmark::State &state, std::string variant, ref::IdaShape s) {
  IdaCase c = make_ida_case(s, 42, true);
  std::vector<float> o(s.B * s.T * s.H * s.Dv), sk(c.state_k.f.size()), sv(c.state_v.f.size());
  fsattn_exec exec{FSATTN_DEVICE_CPU, nullptr, variant.c_str()};
  fsattn_dims dims = c.dims();
  fsattn_ida_params p = c.params();
  time_call(state, c, [&](const IdaCase &x) {
    return fsattn_ida_forward(&exec, &dims, &p, x.q.ptr(), x.k.ptr(), x.v.ptr(), x.state_k.ptr(), x.state_v.ptr(),
                              o.data(), sk.data(), sv.data());
  }, bench::ida_forward_flops_per_token(s.M, s.Dk, s.Dv, chunk_of(variant)));
}

void bla_forward(benchmark::State &state, std::string variant, ref::BlaShape s) {
  BlaCase c = make_bla_case(s, 0, 42, 0.9, true);
  std::vector<float> o(s.B * s.T * s.H * s.Dv), sk(c.state_k.f.size()), sv(c.state_v.f.size());
  fsattn_exec exec{FSATTN_DEVICE_CPU, nullptr, variant.c_str()};
  fsattn_dims dims = c.dims();
  fsattn_bla_params p = c.params();
  time_call(state, c, [&](const BlaCase &x) {
    return fsattn_bla_forward(&exec, &dims, &p, x.q.ptr(), x.k.ptr(), x.v.ptr(), x.state_k.ptr(), x.state_v.ptr(),
                              o.data(), sk.data(), sv.data());
  }, bench::bla_forward_flops_per_token(double(s.S), s.Dk, s.Dv, chunk_of(variant)));
}

void ida_backward(benchmark::State &state, std::string variant, ref::IdaShape s) {
  IdaCase c = make_ida_case(s, 42, true);
  IdaUpstream u = make_ida_upstream(c, 43, true);
  IdaGradResult r = run_ida_backward(c, u, variant.c_str());  // allocates every gradient
  fsattn_exec exec{FSATTN_DEVICE_CPU, nullptr, variant.c_str()};
  fsattn_dims dims = c.dims();
  fsattn_ida_params p = c.params();
  fsattn_ida_grads dp = r.params();
  time_call(state, c, [&](const IdaCase &x) {
    return fsattn_ida_backward(&exec, &dims, &p, x.q.ptr(), x.k.ptr(), x.v.ptr(), x.state_k.ptr(), x.state_v.ptr(),
                               u.d_o.ptr(), u.d_state_k.ptr(), u.d_state_v.ptr(), r.q.data(), r.k.data(), r.v.data(),
                               &dp, r.state_k.data(), r.state_v.data());
  }, bench::ida_backward_flops_per_token(s.M, s.Dk, s.Dv, chunk_of(variant)));
}

void bla_backward(benchmark::State &state, std::string variant, ref::BlaShape s) {
  BlaCase c = make_bla_case(s, 0, 42, 0.9, true);
  BlaUpstream u = make_bla_upstream(c, 43, true);
  std::vector<float> dq(c.q.f.size()), dk(c.k.f.size()), dv(c.v.f.size()), dlg(s.H);
  std::vector<float> dsk(c.state_k.f.size()), dsv(c.state_v.f.size());
  fsattn_exec exec{FSATTN_DEVICE_CPU, nullptr, variant.c_str()};
  fsattn_dims dims = c.dims();
  fsattn_bla_params p = c.params();
  time_call(state, c, [&](const BlaCase &x) {
    return fsattn_bla_backward(&exec, &dims, &p, x.q.ptr(), x.k.ptr(), x.v.ptr(), x.state_k.ptr(), x.state_v.ptr(),
                               u.d_o.ptr(), u.d_state_k.ptr(), u.d_state_v.ptr(), dq.data(), dk.data(), dv.data(),
                               dlg.data(), dsk.data(), dsv.data());
  }, bench::bla_backward_flops_per_token(double(s.S), s.Dk, s.Dv, chunk_of(variant)));
}

// One decoding step at B sequences (the decode issue's shape: H=32, Dk=Dv=64, M=S=64).
// Reports the state bytes read and written per second: the step is bound by them.
template <typename Case, typename Params, typename Step>
void time_step(benchmark::State &state, const Case &c, const Params &p, Step step, size_t state_floats) {
  std::vector<float> sk(c.state_k.f), sv(c.state_v.f), o(c.s.B * c.s.H * c.s.Dv);
  fsattn_exec exec{FSATTN_DEVICE_CPU, nullptr, nullptr};
  fsattn_dims dims = c.dims();
  for (auto _ : state) {
    if (step(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), sk.data(), sv.data(), o.data()) != FSATTN_OK) {
      state.SkipWithError(fsattn_last_error());
      break;
    }
  }
  state.counters["state GB/s"] = benchmark::Counter(2.0 * double(state_floats) * sizeof(float) * 1e-9,
                                                    benchmark::Counter::kIsIterationInvariantRate);
}

void ida_step(benchmark::State &state, int64_t B) {
  IdaCase c = make_ida_case({B, 1, 32, 64, 64, 64}, 42, true);
  time_step(state, c, c.params(), fsattn_ida_step, c.state_k.f.size() + c.state_v.f.size());
}

void bla_step(benchmark::State &state, int64_t B) {
  BlaCase c = make_bla_case({B, 1, 32, 64, 64, 31, 256.0, 64}, 1000, 42, 0.9, true);
  time_step(state, c, c.params(), fsattn_bla_step, c.state_k.f.size() + c.state_v.f.size());
}


// The shape of the IDA issue: B=2, T=2048, H=4, Dk=Dv=64, M=64.
const ref::IdaShape kIdaShape{2, 2048, 4, 64, 64, 64};
// The shape of the BLA issue: B=2, T=2048, H=4, Dk=Dv=64, S=64, M=31, W=256.
const ref::BlaShape kBlaShape{2, 2048, 4, 64, 64, 31, 256.0, 64};

#ifdef FSATTN_BENCH_CUDA
// ---- CUDA ----------------------------------------------------------------------------------
// Each benchmark warms up (module load and PTX compilation, workspace allocation), then times
// kGpuRuns calls one by one with CUDA events on the default stream and reports their median
// as the iteration time. Ceilings measured on the H200 (issue 5): 4.27 TB/s device-to-device
// copy, about 60 TFLOP/s fp32.
constexpr int kGpuRuns = 25;
constexpr double kGpuBytesPerSecond = 4.27e12, kGpuFlopsPerSecond = 60e12;

// Times call() (one or more API calls on the default stream) and reports the median.
template <typename Call>
void time_gpu(benchmark::State &state, Call call, double tokens, double flops, double bytes) {
  const cu::Driver *d = gpu();
  cu::Event start = nullptr, stop = nullptr;
  d->EventCreate(&start, 0);
  d->EventCreate(&stop, 0);
  for (int i = 0; i < 3; ++i) {
    if (call() != FSATTN_OK) {
      state.SkipWithError(fsattn_last_error());
      return;
    }
  }
  d->CtxSynchronize();
  for (auto _ : state) {
    std::vector<float> ms(kGpuRuns);
    for (float &t : ms) {
      d->EventRecord(start, nullptr);
      call();
      d->EventRecord(stop, nullptr);
      d->EventSynchronize(stop);
      d->EventElapsedTime(&t, start, stop);
    }
    std::nth_element(ms.begin(), ms.begin() + kGpuRuns / 2, ms.end());
    state.SetIterationTime(ms[kGpuRuns / 2] * 1e-3);
  }
  d->EventDestroy(start);
  d->EventDestroy(stop);
  state.counters["tokens/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  // Fractions of the ceilings, from the per-iteration rates divided by them.
  state.counters["of_fp32_peak"] =
      benchmark::Counter(flops / kGpuFlopsPerSecond, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["of_copy_bw"] = benchmark::Counter(bytes / kGpuBytesPerSecond, benchmark::Counter::kIsIterationInvariantRate);
}

// Bytes a pass must move at least: each activation read once, each output written once.
double activation_bytes(int64_t B, int64_t T, int64_t H, int64_t D, int tensors) {
  return double(B) * T * H * D * sizeof(float) * tensors;
}

// with_backward: a forward call then a backward call (a training step's work). The final
// states are written (a layer keeps them for decoding), and the backward writes the initial
// states' gradients over them (the autoscheduled builds need every output whole); it gets
// no final-state gradients.
void ida_cuda(benchmark::State &state, std::string variant, ref::IdaShape s, bool with_backward) {
  IdaCase c = make_ida_case(s, 42, false);
  IdaUpstream u = make_ida_upstream(c, 43, false);
  DeviceArena a;
  const fsattn_ida_params p = device_params(a, c);
  float *q = a.up(c.q), *k = a.up(c.k), *v = a.up(c.v), *o = a.out(c.v.f.size()), *d_o = a.up(u.d_o);
  float *sk = a.out(s.B * s.H * s.M * s.Dk * 2), *sv = a.out(s.B * s.H * s.M * s.Dv * 2);
  float *dq = a.out(c.q.f.size()), *dk = a.out(c.k.f.size()), *dv = a.out(c.v.f.size());
  const fsattn_ida_grads g{a.out(s.H * s.Dk), a.out(s.H * s.Dk), a.out(s.H * s.Dv), a.out(s.H * s.Dv), a.out(s.H),
                           a.out(s.H * s.M), a.out(s.H * s.M), a.out(s.H * s.M * 2), a.out(s.H * s.M * s.M * 2)};
  const fsattn_exec exec = cuda_exec(nullptr, variant.c_str());
  const fsattn_dims dims = c.dims();
  const int L = chunk_of(variant);
  double flops = double(s.B * s.T * s.H) * bench::ida_forward_flops_per_token(s.M, s.Dk, s.Dv, L);
  double bytes = activation_bytes(s.B, s.T, s.H, s.Dk, 4);
  if (with_backward) {
    flops += double(s.B * s.T * s.H) * bench::ida_backward_flops_per_token(s.M, s.Dk, s.Dv, L);
    bytes += activation_bytes(s.B, s.T, s.H, s.Dk, 7);  // q, k, v, d_o in; dq, dk, dv out
  }
  time_gpu(state, [&] {
    fsattn_status st = fsattn_ida_forward(&exec, &dims, &p, q, k, v, nullptr, nullptr, o, sk, sv);
    if (st == FSATTN_OK && with_backward) {
      st = fsattn_ida_backward(&exec, &dims, &p, q, k, v, nullptr, nullptr, d_o, nullptr, nullptr, dq, dk, dv, &g,
                               sk, sv);
    }
    return st;
  }, double(s.B * s.T), flops, bytes);
}

void bla_cuda(benchmark::State &state, std::string variant, ref::BlaShape s, bool with_backward) {
  BlaCase c = make_bla_case(s, 0, 42, 0.9, false);
  BlaUpstream u = make_bla_upstream(c, 43, false);
  DeviceArena a;
  fsattn_bla_params p = c.params();
  p.log_gamma = a.up(c.log_gamma);
  float *q = a.up(c.q), *k = a.up(c.k), *v = a.up(c.v), *o = a.out(c.v.f.size()), *d_o = a.up(u.d_o);
  float *dq = a.out(c.q.f.size()), *dk = a.out(c.k.f.size()), *dv = a.out(c.v.f.size()), *dlg = a.out(s.H);
  float *sk = a.out(s.B * s.H * s.S * s.Dk), *sv = a.out(s.B * s.H * s.S * s.Dv);
  const fsattn_exec exec = cuda_exec(nullptr, variant.c_str());
  const fsattn_dims dims = c.dims();
  const int L = chunk_of(variant);
  double flops = double(s.B * s.T * s.H) * bench::bla_forward_flops_per_token(double(s.S), s.Dk, s.Dv, L);
  double bytes = activation_bytes(s.B, s.T, s.H, s.Dk, 4);
  if (with_backward) {
    flops += double(s.B * s.T * s.H) * bench::bla_backward_flops_per_token(double(s.S), s.Dk, s.Dv, L);
    bytes += activation_bytes(s.B, s.T, s.H, s.Dk, 7);
  }
  time_gpu(state, [&] {
    fsattn_status st = fsattn_bla_forward(&exec, &dims, &p, q, k, v, nullptr, nullptr, o, sk, sv);
    if (st == FSATTN_OK && with_backward) {
      st = fsattn_bla_backward(&exec, &dims, &p, q, k, v, nullptr, nullptr, d_o, nullptr, nullptr, dq, dk, dv, dlg,
                               sk, sv);
    }
    return st;
  }, double(s.B * s.T), flops, bytes);
}

// One decoding step at B sequences on the GPU (H=32, Dk=Dv=64, M=S=64): states in place.
template <typename Case, typename Params, typename Step>
void step_cuda(benchmark::State &state, const Case &c, Params p, Step step, size_t state_floats) {
  DeviceArena a;
  float *q = a.up(c.q), *k = a.up(c.k), *v = a.up(c.v), *sk = a.up(c.state_k), *sv = a.up(c.state_v);
  float *o = a.out(c.s.B * c.s.H * c.s.Dv);
  const fsattn_exec exec = cuda_exec();
  const fsattn_dims dims = c.dims();
  time_gpu(state, [&] { return step(&exec, &dims, &p, q, k, v, sk, sv, o); }, double(c.s.B), 0.0,
           2.0 * double(state_floats) * sizeof(float));
}

void ida_step_cuda(benchmark::State &state, int64_t B) {
  IdaCase c = make_ida_case({B, 1, 32, 64, 64, 64}, 42, true);
  DeviceArena a;
  step_cuda(state, c, device_params(a, c), fsattn_ida_step, c.state_k.f.size() + c.state_v.f.size());
}

void bla_step_cuda(benchmark::State &state, int64_t B) {
  BlaCase c = make_bla_case({B, 1, 32, 64, 64, 31, 256.0, 64}, 1000, 42, 0.9, true);
  DeviceArena a;
  fsattn_bla_params p = c.params();
  p.log_gamma = a.up(c.log_gamma);
  step_cuda(state, c, p, fsattn_bla_step, c.state_k.f.size() + c.state_v.f.size());
}

// The CUDA issue's shape: B=8, T=4096, H=16, Dk=Dv=64, 64 modes or slots (BLA: M=31, W=256).
const ref::IdaShape kIdaGpuShape{8, 4096, 16, 64, 64, 64};
const ref::BlaShape kBlaGpuShape{8, 4096, 16, 64, 64, 31, 256.0, 64};

// The CUDA variants of an op: every one, or (all = false) the hand schedules only.
std::vector<std::string> cuda_variants(fsattn_op op, bool all = true) {
  std::vector<std::string> v;
  for (int i = 0; i < fsattn_variant_count(op, FSATTN_DEVICE_CUDA); ++i) {
    const std::string name = fsattn_variant_name(op, FSATTN_DEVICE_CUDA, i);
    if (all || !is_baseline(name)) v.push_back(name);
  }
  return v;
}

void configure_cuda(benchmark::internal::Benchmark *b) {
  b->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(1);
}

// The four scan benchmarks at one shape, for every CUDA variant (all = false: the hand
// schedules only); `suffix` ends each name.
void register_cuda_at(const std::string &suffix, const ref::IdaShape &ida, const ref::BlaShape &bla, bool all) {
  struct Op {
    fsattn_op op;
    const char *name;
    bool ida, with_backward;
  };
  for (const Op &o : {Op{FSATTN_OP_IDA_FORWARD, "ida_forward", true, false},
                      Op{FSATTN_OP_IDA_BACKWARD, "ida_forward+backward", true, true},
                      Op{FSATTN_OP_BLA_FORWARD, "bla_forward", false, false},
                      Op{FSATTN_OP_BLA_BACKWARD, "bla_forward+backward", false, true}}) {
    for (const std::string &v : cuda_variants(o.op, all)) {
      const std::string name = std::string(o.name) + "/cuda/" + v + suffix;
      configure_cuda(o.ida ? benchmark::RegisterBenchmark(name.c_str(), ida_cuda, v, ida, o.with_backward)
                           : benchmark::RegisterBenchmark(name.c_str(), bla_cuda, v, bla, o.with_backward));
    }
  }
}

void register_cuda() {
  if (gpu() == nullptr) return;
  // Every CUDA variant, the Li2018 builds included, at the shape the baselines are built for
  // (the CPU benchmark's); the hand schedules at the CUDA issue's shape, which they refuse.
  register_cuda_at("/B=2,T=2048,H=4", kIdaShape, kBlaShape, true);
  register_cuda_at("", kIdaGpuShape, kBlaGpuShape, false);
  for (int64_t B : {1, 4, 16, 64, 256}) {
    const std::string batch = "/B=" + std::to_string(B);
    for (auto *b : {benchmark::RegisterBenchmark(("ida_step/cuda" + batch).c_str(), ida_step_cuda, B),
                    benchmark::RegisterBenchmark(("bla_step/cuda" + batch).c_str(), bla_step_cuda, B)}) {
      configure_cuda(b);
      b->Unit(benchmark::kMicrosecond);
    }
  }
}
#endif


int register_all() {
  auto configure = [](benchmark::internal::Benchmark *b) {
    b->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
  };
  for (const std::string &v : cpu_variants(FSATTN_OP_IDA_FORWARD)) {
    configure(benchmark::RegisterBenchmark(("ida_forward/cpu/" + v).c_str(), ida_forward, v, kIdaShape));
  }
  for (const std::string &v : cpu_variants(FSATTN_OP_IDA_BACKWARD)) {
    configure(benchmark::RegisterBenchmark(("ida_backward/cpu/" + v).c_str(), ida_backward, v, kIdaShape));
  }
  for (const std::string &v : cpu_variants(FSATTN_OP_BLA_FORWARD)) {
    configure(benchmark::RegisterBenchmark(("bla_forward/cpu/" + v).c_str(), bla_forward, v, kBlaShape));
  }
  for (const std::string &v : cpu_variants(FSATTN_OP_BLA_BACKWARD)) {
    configure(benchmark::RegisterBenchmark(("bla_backward/cpu/" + v).c_str(), bla_backward, v, kBlaShape));
  }
  for (int64_t B : {1, 4, 16, 64, 256}) {
    const std::string batch = "/B=" + std::to_string(B);
    for (auto *b : {benchmark::RegisterBenchmark(("ida_step/cpu" + batch).c_str(), ida_step, B),
                    benchmark::RegisterBenchmark(("bla_step/cpu" + batch).c_str(), bla_step, B)}) {
      configure(b);
      b->Unit(benchmark::kMicrosecond);
    }
  }
#ifdef FSATTN_BENCH_CUDA
  register_cuda();
#endif
  return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
