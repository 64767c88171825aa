// A forward call whose tensors hold more than 2^31 elements (64-bit addressing inside one
// kernel call). Needs about 48 GB of memory, so it runs only when FSATTN_HUGE_TESTS=1.
#include "fsattn/fsattn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <vector>

namespace {

// BLA with one slot and no modes: φ = 1/W and the softmax over one slot is 1, so
// o_t = γ o_{t-1} + v_t / W, which a float64 loop checks at every token.
TEST(HugeShapes, BlaForwardPast2To31Elements) {
  if (std::getenv("FSATTN_HUGE_TESTS") == nullptr) GTEST_SKIP() << "set FSATTN_HUGE_TESTS=1 (needs ~48 GB)";
  const int64_t B = 2, T = (int64_t(1) << 30) + 5, H = 1, D = 1;  // B·T·H·D = 2^31 + 10
  const double W = 3.0, gamma = 0.999;
  std::vector<float> x(size_t(B * T * H * D)), o(x.size(), NAN);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(double(i) * 1e-3) + 0.25 * std::cos(double(i) * 0.37));
  const float log_gamma = float(std::log(gamma));
  fsattn_exec exec{FSATTN_DEVICE_CPU, nullptr, nullptr};
  fsattn_dims dims{B, T, H, D, D, nullptr, 0};
  fsattn_bla_params p{0, W, 1, 0.0f, 12345, &log_gamma};
  ASSERT_EQ(fsattn_bla_forward(&exec, &dims, &p, x.data(), x.data(), x.data(), nullptr, nullptr, o.data(), nullptr,
                               nullptr),
            FSATTN_OK)
      << fsattn_last_error();
  const double g = std::exp(double(log_gamma));
  double max_err = 0, max_ref = 0;
  for (int64_t b = 0; b < B; ++b) {
    double acc = 0;
    for (int64_t t = 0; t < T; ++t) {
      const size_t at = size_t(b * T + t);
      acc = g * acc + double(x[at]) / W;
      max_err = std::max(max_err, std::abs(double(o[at]) - acc));
      max_ref = std::max(max_ref, std::abs(acc));
    }
  }
  std::printf("B·T·H·D = %lld elements: max |error| %.3g of max |o| %.3g\n", (long long)(B * T * H * D), max_err, max_ref);
  EXPECT_LE(max_err, 1e-4 * max_ref);
}

}  // namespace
