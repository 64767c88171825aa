// CUDA streams and contexts: a call runs in the context current on its thread (else device
// 0's primary context), and a stream of any other context is refused before anything is
// written, since neither the kernels nor the NaN fill of a failed call could run on it.
#include "device.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace fsattn;
using namespace fsattn::test;

namespace {

TEST(CudaContexts, StreamsOfAnotherContextAreRefused) {
  std::string why;
  const cu::Driver *d = gpu(&why);
  if (d == nullptr) GTEST_SKIP() << why;
  const BlaCase c = make_bla_case({1, 33, 2, 8, 8, 2, 9.5, 5}, 0, 91, 0.5, false);
  DeviceArena a;
  fsattn_bla_params p = c.params();
  p.log_gamma = a.up(c.log_gamma);
  const fsattn_dims dims = c.dims();
  float *q = a.up(c.q), *k = a.up(c.k), *v = a.up(c.v), *o = a.out(c.q.f.size());

  // A second context on device 0 (current once created), with a stream of its own.
  cu::Context primary = nullptr, other = nullptr;
  ASSERT_EQ(d->CtxGetCurrent(&primary), cu::kSuccess);
  ASSERT_EQ(d->CtxCreate(&other, 0, 0), cu::kSuccess);
  cu::Stream foreign = nullptr;
  ASSERT_EQ(d->StreamCreate(&foreign, cu::kStreamNonBlocking), cu::kSuccess);
  ASSERT_EQ(d->CtxSetCurrent(primary), cu::kSuccess);

  fsattn_exec exec = cuda_exec(foreign);
  EXPECT_EQ(fsattn_bla_forward(&exec, &dims, &p, q, k, v, nullptr, nullptr, o, nullptr, nullptr),
            FSATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fsattn_last_error()).find("another CUDA context"), std::string::npos) << fsattn_last_error();
  fsattn_dims one = dims;
  one.seqlen = 1;
  float *sk = a.out(size_t(2 * 5 * 8)), *sv = a.out(size_t(2 * 5 * 8)), *o1 = a.out(size_t(2 * 8));
  EXPECT_EQ(fsattn_bla_step(&exec, &one, &p, q, k, v, sk, sv, o1), FSATTN_ERROR_INVALID_ARGUMENT);
  for (const float *out : {o, sk, sv, o1}) {
    for (float e : a.down(out)) ASSERT_TRUE(std::isnan(e));
  }

  // On a stream of the call's context the same call runs.
  exec = cuda_exec();
  EXPECT_EQ(fsattn_bla_forward(&exec, &dims, &p, q, k, v, nullptr, nullptr, o, nullptr, nullptr), FSATTN_OK)
      << fsattn_last_error();
  ASSERT_EQ(d->CtxSetCurrent(other), cu::kSuccess);
  EXPECT_EQ(d->StreamDestroy(foreign), cu::kSuccess);
  ASSERT_EQ(d->CtxSetCurrent(primary), cu::kSuccess);
  EXPECT_EQ(d->CtxDestroy(other), cu::kSuccess);
}

}  // namespace
