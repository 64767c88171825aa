// A forward call whose tensors hold more than 2^31 elements (64-bit addressing inside one
// kernel call). Needs about 31 GB of memory, so it runs only when FSATTN_HUGE_TESTS=1.
#include "fsattn/fsattn.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace {

// BLA with one slot and no modes: φ = 1/W and the softmax over one slot is 1, so per channel
// o_t = γ o_{t-1} + v_t / W, and the final value state is the last o. A float64 loop checks
// every output element.
//
// D = 64, not 1: the kernels' intermediates cost per token, not per element (at D = 1 and
// one slot about 142 bytes per token, 300 GB at this size; at D = 64 about 400 bytes per
// token, 13 GB: measured with fsattn_set_workspace_limit on the 2-core Xeon).
TEST(HugeShapes, BlaForwardPast2To31Elements) {
  if (std::getenv("FSATTN_HUGE_TESTS") == nullptr) GTEST_SKIP() << "set FSATTN_HUGE_TESTS=1 (needs ~31 GB)";
  const int64_t B = 2, T = (int64_t(1) << 24) + 5, H = 1, D = 64;  // B·T·H·D = 2^31 + 640
  const double W = 3.0, gamma = 0.999;
  const size_t n = size_t(B * T * H * D);
  ASSERT_GT(n, size_t(1) << 31);
  // Values in [-1, 1) from a multiplicative hash of the index: sin() over 2^31 elements took
  // most of a minute.
  std::vector<float> x(n), o(n, NAN), state_v(size_t(B * H * D), NAN);
  for (size_t i = 0; i < n; ++i) x[i] = float(int32_t(uint32_t(i) * 2654435761u)) * 0x1p-31f;
  const float log_gamma = float(std::log(gamma));
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  fsattn_dims dims{sizeof(fsattn_dims), B, T, H, D, D, nullptr, 0};
  fsattn_bla_params p{sizeof(fsattn_bla_params), 0, W, 1, 0.0f, 12345, &log_gamma};
  ASSERT_EQ(fsattn_bla_forward(&exec, &dims, &p, x.data(), x.data(), x.data(), nullptr, nullptr, o.data(), nullptr,
                               state_v.data()),
            FSATTN_OK)
      << fsattn_last_error();
  const double g = std::exp(double(log_gamma));
  double max_err = 0, max_ref = 0;
  std::vector<double> acc(static_cast<size_t>(D));
  for (int64_t b = 0; b < B; ++b) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t t = 0; t < T; ++t) {
      const size_t at = size_t((b * T + t) * D);
      for (int64_t r = 0; r < D; ++r) {
        acc[r] = g * acc[r] + double(x[at + r]) / W;
        max_err = std::max(max_err, std::abs(double(o[at + r]) - acc[r]));
        max_ref = std::max(max_ref, std::abs(acc[r]));
      }
    }
    for (int64_t r = 0; r < D; ++r) {
      max_err = std::max(max_err, std::abs(double(state_v[size_t(b * D + r)]) - acc[r]));
    }
  }
  std::printf("B·T·H·D = %lld elements: max |error| %.3g of max |o| %.3g\n", (long long)n, max_err, max_ref);
  EXPECT_LE(max_err, 1e-4 * max_ref);
}

}  // namespace
