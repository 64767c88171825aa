// fsattn-first-call: what the first CUDA call of each op costs in a new process, against the
// next call of the same op. The first call loads the op's kernels and has the driver compile
// their PTX for the GPU at hand (cached on disk unless CUDA_CACHE_DISABLE=1), and allocates
// the workspace. Each op runs its default variant at a small shape (B=1, T=256, H=4, D=64,
// 64 modes or slots; the steps at B=1, H=32), timed on the host around the call and a
// synchronisation.
#include "op_calls.h"

#include <chrono>
#include <cstdio>

using namespace fsattn;
using namespace fsattn::bench;

namespace {

double timed_ms(const std::function<fsattn_status()> &run, fsattn_status *status) {
  const cu::Driver *d = test::gpu();
  const auto start = std::chrono::steady_clock::now();
  *status = run();
  if (*status == FSATTN_OK && d->CtxSynchronize() != cu::kSuccess) *status = FSATTN_ERROR_DEVICE;
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main() {
  std::string why;
  const auto start = std::chrono::steady_clock::now();
  if (test::gpu(&why) == nullptr) {
    std::fprintf(stderr, "fsattn-first-call: no GPU: %s\n", why.c_str());
    return 1;
  }
  std::printf("context: %.1f ms (driver and primary context, before any fsattn call)\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  std::printf("%-14s %12s %12s\n", "op", "first ms", "second ms");
  const fsattn_op ops[] = {FSATTN_OP_IDA_FORWARD,  FSATTN_OP_IDA_BACKWARD, FSATTN_OP_BLA_FORWARD,
                           FSATTN_OP_BLA_BACKWARD, FSATTN_OP_IDA_STEP,     FSATTN_OP_BLA_STEP};
  double total = 0;
  for (fsattn_op op : ops) {
    const bool step = op == FSATTN_OP_IDA_STEP || op == FSATTN_OP_BLA_STEP;
    const OpShape shape = step ? OpShape{1, 1, 32, 64, 64, 64} : OpShape{1, 256, 4, 64, 64, 64};
    auto call = prepare(op, FSATTN_DEVICE_CUDA, nullptr, shape);
    fsattn_status status = FSATTN_OK;
    const double first = timed_ms(call->run, &status);
    const double second = status == FSATTN_OK ? timed_ms(call->run, &status) : 0;
    if (status != FSATTN_OK) {
      std::fprintf(stderr, "fsattn-first-call: %s: %s\n", fsattn_op_name(op), fsattn_last_error());
      return 1;
    }
    total += first;
    std::printf("%-14s %12.1f %12.3f\n", fsattn_op_name(op), first, second);
  }
  std::printf("all six first calls: %.0f ms\n", total);
  return 0;
}
