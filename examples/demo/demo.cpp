// fsattn-demo: the main job. Runs each mixer forward on the CPU at a small shape, checks
// every compiled schedule against the float64 reference, and prints a table of error and
// time per schedule.
#include "test_util.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

using namespace fsattn;
using namespace fsattn::test;

namespace {

constexpr double kTol = 1e-5;  // SPEC.md §4, forward

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
// run(variant) returns the kernel's outputs; want holds the reference's.
template <typename Run, typename Want>
bool demo_schedules(fsattn_op op, Run run, const Want &want) {
  std::printf("  %-28s %12s %12s %10s  %s\n", "schedule", "rel. error", "state error", "time (ms)", "check");
  bool all_ok = true;
  for (const std::string &v : cpu_variants(op)) {
    auto r = run(v.c_str());
    if (r.status != FSATTN_OK) {
      std::printf("  %-28s failed: %s\n", v.c_str(), fsattn_last_error());
      all_ok = false;
      continue;
    }
    double err = rel_error(r.o, want.o);
    double serr = std::max(rel_error(r.state_k, want.state_k), rel_error(r.state_v, want.state_v));
    double ms = median_ms([&] { run(v.c_str()); }, 15);
    bool ok = err <= kTol && serr <= kTol;
    all_ok &= ok;
    std::printf("  %-28s %12.2e %12.2e %10.3f  %s\n", v.c_str(), err, serr, ms, ok ? "ok" : "FAILED");
  }
  return all_ok;
}

bool demo_ida() {
  const ref::IdaShape s{1, 2048, 4, 64, 64, 64};  // the sizes the baselines are built for
  std::printf("IDA forward, CPU: B=%lld T=%lld H=%lld Dk=%lld Dv=%lld M=%lld, random inputs, S4D-Inv modes\n",
              (long long)s.B, (long long)s.T, (long long)s.H, (long long)s.Dk, (long long)s.Dv, (long long)s.M);
  IdaCase c = make_ida_case(s, 2024, true);
  return demo_schedules(FSATTN_OP_IDA_FORWARD, [&](const char *v) { return run_ida_forward(c, v); },
                        reference_ida_forward(c));
}

bool demo_bla() {
  const ref::BlaShape s{1, 2048, 4, 64, 64, 31, 256.0, 64};  // the sizes the baselines are built for
  const int64_t pos0 = 1000;
  std::printf("BLA forward, CPU: B=%lld T=%lld H=%lld Dk=%lld Dv=%lld S=%lld M=%lld W=%g pos0=%lld, random inputs\n",
              (long long)s.B, (long long)s.T, (long long)s.H, (long long)s.Dk, (long long)s.Dv, (long long)s.S,
              (long long)s.M, s.W, (long long)pos0);
  BlaCase c = make_bla_case(s, pos0, 2025, 0.95, true);
  return demo_schedules(FSATTN_OP_BLA_FORWARD, [&](const char *v) { return run_bla_forward(c, v); },
                        reference_bla_forward(c));
}

}  // namespace

int main() {
  std::printf("fsattn %s demo (errors: relative Frobenius vs the float64 reference; tolerance %.0e)\n\n",
              fsattn_version(), kTol);
  bool ok = demo_ida();
  std::printf("\n");
  ok &= demo_bla();
  std::printf("\n%s\n", ok ? "all schedules match the reference" : "SOME SCHEDULES FAILED");
  return ok ? 0 : 1;
}
