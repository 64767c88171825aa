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

bool demo_ida() {
  const ref::IdaShape s{2, 512, 4, 64, 64, 32};
  std::printf("IDA forward, CPU: B=%lld T=%lld H=%lld Dk=%lld Dv=%lld M=%lld, random inputs, S4D-Inv modes\n",
              (long long)s.B, (long long)s.T, (long long)s.H, (long long)s.Dk, (long long)s.Dv, (long long)s.M);
  IdaCase c = make_ida_case(s, 2024, true);
  ref::IdaOutputs want = reference_ida_forward(c);
  std::printf("  %-28s %12s %12s %10s  %s\n", "schedule", "rel. error", "state error", "time (ms)", "check");
  bool all_ok = true;
  for (const std::string &v : cpu_variants(FSATTN_OP_IDA_FORWARD)) {
    IdaResult r = run_ida_forward(c, v.c_str());
    if (r.status != FSATTN_OK) {
      std::printf("  %-28s failed: %s\n", v.c_str(), fsattn_last_error());
      all_ok = false;
      continue;
    }
    double err = rel_error(r.o, want.o);
    double serr = std::max(rel_error(r.state_k, want.state_k), rel_error(r.state_v, want.state_v));
    double ms = median_ms([&] { run_ida_forward(c, v.c_str()); }, 15);
    bool ok = err <= kTol && serr <= kTol;
    all_ok &= ok;
    std::printf("  %-28s %12.2e %12.2e %10.3f  %s\n", v.c_str(), err, serr, ms, ok ? "ok" : "FAILED");
  }
  return all_ok;
}

}  // namespace

int main() {
  std::printf("fsattn %s demo (errors: relative Frobenius vs the float64 reference; tolerance %.0e)\n\n",
              fsattn_version(), kTol);
  bool ok = demo_ida();
  std::printf("\n%s\n", ok ? "all schedules match the reference" : "SOME SCHEDULES FAILED");
  return ok ? 0 : 1;
}
