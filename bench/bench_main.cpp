// fsattn-bench: every compiled CPU variant of every kernel, on the shapes of the issues.
// Reports time, tokens/s and GFLOP/s (flops.h gives the count).
#include "flops.h"
#include "test_util.h"

#include <benchmark/benchmark.h>

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
  return 0;
}
const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
