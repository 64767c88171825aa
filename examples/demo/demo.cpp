// fsattn-demo: the main job. Runs each mixer forward and backward on the CPU at a small
// shape, checks every compiled schedule against the float64 reference, and prints a table of
// error and time per schedule.
#include "cases.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

using namespace fsattn;
using namespace fsattn::test;

namespace {

constexpr double kTol = 1e-5;      // docs/spec.md §4, forward
constexpr double kGradTol = 1e-4;  // docs/spec.md §4, gradients

// Median wall time of `reps` runs of f, in milliseconds.
template <typename F>
double median_ms(F &&f, int reps) {
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Every compiled CPU schedule of `op`: error against the reference and median time.
// run(variant) returns the kernel's result; errors(result) its (output, state) errors.
template <typename Run, typename Errors>
bool demo_schedules(fsattn_op op, double tol, Run run, Errors errors) {
  std::printf("  %-28s %12s %12s %10s  %s\n", "schedule", "rel. error", "state error", "time (ms)", "check");
  bool all_ok = true;
  for (const std::string &v : cpu_variants(op)) {
    auto r = run(v.c_str());
    if (r.status != FSATTN_OK) {
      std::printf("  %-28s failed: %s\n", v.c_str(), fsattn_last_error());
      all_ok = false;
      continue;
    }
    const auto [err, serr] = errors(r);
    double ms = median_ms([&] { run(v.c_str()); }, 15);
    bool ok = err <= tol && serr <= tol;
    all_ok &= ok;
    std::printf("  %-28s %12.2e %12.2e %10.3f  %s\n", v.c_str(), err, serr, ms, ok ? "ok" : "FAILED");
  }
  return all_ok;
}

// A forward result's (o, final state) errors.
template <typename Want>
auto forward_errors(const Want &want) {
  return [&want](const ForwardResult &r) {
    return std::pair(rel_error(r.o, want.o),
                     std::max(rel_error(r.state_k, want.state_k), rel_error(r.state_v, want.state_v)));
  };
}

const ref::IdaShape kIdaShape{1, 2048, 4, 64, 64, 64};  // the sizes the baselines are built for

void print_ida_shape(const char *what) {
  const ref::IdaShape &s = kIdaShape;
  std::printf("IDA %s, CPU: B=%lld T=%lld H=%lld Dk=%lld Dv=%lld M=%lld, random inputs, S4D-Inv modes\n", what,
              (long long)s.B, (long long)s.T, (long long)s.H, (long long)s.Dk, (long long)s.Dv, (long long)s.M);
}

bool demo_ida() {
  print_ida_shape("forward");
  IdaCase c = make_ida_case(kIdaShape, 2024, true);
  const ref::IdaOutputs want = reference_ida_forward(c);
  return demo_schedules(
      FSATTN_OP_IDA_FORWARD, kTol, [&](const char *v) { return run_ida_forward(c, v); }, forward_errors(want));
}

bool demo_ida_backward() {
  print_ida_shape("backward (all gradients, parameters' included, given d_o and the final states' gradients)");
  IdaCase c = make_ida_case(kIdaShape, 2024, true);
  IdaUpstream u = make_ida_upstream(c, 2025, true);
  const ref::IdaGrads want = reference_ida_backward(c, u);
  auto errors = [&](const IdaGradResult &r) {
    double err = 0;
    for (auto [got, ref] :
         {std::pair(&r.q, &want.q), std::pair(&r.k, &want.k), std::pair(&r.v, &want.v), std::pair(&r.gk, &want.gk),
          std::pair(&r.bk, &want.bk), std::pair(&r.gv, &want.gv), std::pair(&r.bv, &want.bv),
          std::pair(&r.log_dt, &want.log_dt), std::pair(&r.A_re_log, &want.A_re_log), std::pair(&r.A_im, &want.A_im),
          std::pair(&r.B, &want.B), std::pair(&r.C, &want.C)}) {
      err = std::max(err, rel_error(*got, *ref));
    }
    return std::pair(err, std::max(rel_error(r.state_k, want.state_k), rel_error(r.state_v, want.state_v)));
  };
  return demo_schedules(
      FSATTN_OP_IDA_BACKWARD, kGradTol, [&](const char *v) { return run_ida_backward(c, u, v); }, errors);
}

const ref::BlaShape kBlaShape{1, 2048, 4, 64, 64, 31, 256.0, 64};  // the sizes the baselines are built for
constexpr int64_t kBlaPos0 = 1000;

void print_bla_shape(const char *what) {
  const ref::BlaShape &s = kBlaShape;
  std::printf("BLA %s, CPU: B=%lld T=%lld H=%lld Dk=%lld Dv=%lld S=%lld M=%lld W=%g pos0=%lld, random inputs\n", what,
              (long long)s.B, (long long)s.T, (long long)s.H, (long long)s.Dk, (long long)s.Dv, (long long)s.S,
              (long long)s.M, s.W, (long long)kBlaPos0);
}

bool demo_bla() {
  print_bla_shape("forward");
  BlaCase c = make_bla_case(kBlaShape, kBlaPos0, 2025, 0.95, true);
  const ref::BlaOutputs want = reference_bla_forward(c);
  return demo_schedules(
      FSATTN_OP_BLA_FORWARD, kTol, [&](const char *v) { return run_bla_forward(c, v); }, forward_errors(want));
}

bool demo_bla_backward() {
  print_bla_shape("backward (all gradients, given d_o and the final states' gradients)");
  BlaCase c = make_bla_case(kBlaShape, kBlaPos0, 2025, 0.95, true);
  BlaUpstream u = make_bla_upstream(c, 2026, true);
  const ref::BlaGrads want = reference_bla_backward(c, u);
  auto errors = [&](const BlaGradResult &r) {
    double err = std::max({rel_error(r.q, want.q), rel_error(r.k, want.k), rel_error(r.v, want.v),
                           rel_error(r.log_gamma, want.log_gamma)});
    return std::pair(err, std::max(rel_error(r.state_k, want.state_k), rel_error(r.state_v, want.state_v)));
  };
  return demo_schedules(
      FSATTN_OP_BLA_BACKWARD, kGradTol, [&](const char *v) { return run_bla_backward(c, u, v); }, errors);
}

}  // namespace

int main() {
  std::printf(
      "fsattn %s demo (errors: relative Frobenius vs the float64 reference; tolerance %.0e forward, "
      "%.0e gradients)\n\n",
      fsattn_version(), kTol, kGradTol);
  bool ok = demo_ida();
  std::printf("\n");
  ok &= demo_ida_backward();
  std::printf("\n");
  ok &= demo_bla();
  std::printf("\n");
  ok &= demo_bla_backward();
  std::printf("\n%s\n", ok ? "all schedules match the reference" : "SOME SCHEDULES FAILED");
  return ok ? 0 : 1;
}
