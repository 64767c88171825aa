// The CUDA kernels (ctest label `gpu`; every test skips with a message when no GPU is
// present): the same float64 reference comparisons as the CPU suites on the same odd shapes,
// state chaining and in-place states, bitwise determinism, agreement with the CPU kernels at
// a shape that fills the GPU, two streams running different calls at once, decode steps, and
// the checks of device pointers.
#include "device.h"
#include "expect_match.h"
#include "poison.h"
#include "shapes.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

using namespace fsattn;
using namespace fsattn::test;

#define FSATTN_REQUIRE_GPU()                                         \
  do {                                                               \
    std::string why_;                                                \
    if (::fsattn::test::gpu(&why_) == nullptr) GTEST_SKIP() << why_; \
  } while (0)

namespace {

// The harness's failed driver calls are this suite's failures.
const bool kDriverFailuresFail = [] {
  device_failure = [](const std::string &what) { ADD_FAILURE() << what; };
  return true;
}();

constexpr double kForwardTol = 1e-5, kGradTol = 1e-4;  // docs/spec.md §4

// The CUDA variants of an op: the hand schedules, or the autoscheduled baselines (which are
// built for the CPU benchmark shape and refuse others, as on the CPU).
std::vector<std::string> cuda_variants(fsattn_op op, bool baselines = false) {
  return variants(op, FSATTN_DEVICE_CUDA, baselines ? Schedules::kBaselines : Schedules::kHand);
}

void expect_bitwise(const std::vector<float> &a, const std::vector<float> &b, const char *what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << what << " differs between runs";
}

// ---- against the float64 reference, every CUDA variant, the CPU suites' shapes ----------

class IdaForwardCuda : public ::testing::TestWithParam<std::tuple<IdaShapeCase, std::string, bool>> {};
TEST_P(IdaForwardCuda, MatchesReference) {
  FSATTN_REQUIRE_GPU();
  const auto &[shape, variant, with_state] = GetParam();
  IdaCase c = make_ida_case(shape.s, 1234 + shape.s.T, with_state);
  expect_match(gpu_ida_forward(c, nullptr, variant.c_str()), reference_ida_forward(c), kForwardTol, variant);
}
INSTANTIATE_TEST_SUITE_P(Gpu, IdaForwardCuda,
                         ::testing::Combine(::testing::ValuesIn(kIdaForwardShapes),
                                            ::testing::ValuesIn(cuda_variants(FSATTN_OP_IDA_FORWARD)),
                                            ::testing::Bool()),
                         ShapeVariantStateName());

class BlaForwardCuda : public ::testing::TestWithParam<std::tuple<BlaShapeCase, std::string, bool>> {};
TEST_P(BlaForwardCuda, MatchesReference) {
  FSATTN_REQUIRE_GPU();
  const auto &[shape, variant, with_state] = GetParam();
  BlaCase c = make_bla_case(shape.s, shape.pos0, 4321 + shape.s.T, 0.9, with_state);
  expect_match(gpu_bla_forward(c, nullptr, variant.c_str()), reference_bla_forward(c), kForwardTol, variant);
}
INSTANTIATE_TEST_SUITE_P(Gpu, BlaForwardCuda,
                         ::testing::Combine(::testing::ValuesIn(kBlaForwardShapes),
                                            ::testing::ValuesIn(cuda_variants(FSATTN_OP_BLA_FORWARD)),
                                            ::testing::Bool()),
                         ShapeVariantStateName());

class IdaBackwardCuda : public ::testing::TestWithParam<std::tuple<IdaShapeCase, std::string, bool>> {};
TEST_P(IdaBackwardCuda, MatchesReference) {
  FSATTN_REQUIRE_GPU();
  const auto &[shape, variant, with_state] = GetParam();
  IdaCase c = make_ida_case(shape.s, 555 + shape.s.T, with_state);
  IdaUpstream u = make_ida_upstream(c, 66 + shape.s.T, with_state);
  expect_ida_grads_match(gpu_ida_backward(c, u, variant.c_str()), reference_ida_backward(c, u), kGradTol, variant);
}
INSTANTIATE_TEST_SUITE_P(Gpu, IdaBackwardCuda,
                         ::testing::Combine(::testing::ValuesIn(kIdaBackwardShapes),
                                            ::testing::ValuesIn(cuda_variants(FSATTN_OP_IDA_BACKWARD)),
                                            ::testing::Bool()),
                         ShapeVariantStateName());

class BlaBackwardCuda : public ::testing::TestWithParam<std::tuple<BlaShapeCase, std::string, bool>> {};
TEST_P(BlaBackwardCuda, MatchesReference) {
  FSATTN_REQUIRE_GPU();
  const auto &[shape, variant, with_state] = GetParam();
  BlaCase c = make_bla_case(shape.s, shape.pos0, 777 + shape.s.T, 0.9, with_state);
  BlaUpstream u = make_bla_upstream(c, 99 + shape.s.T, with_state);
  expect_grads_match(gpu_bla_backward(c, u, variant.c_str()), reference_bla_backward(c, u), kGradTol, variant);
}
INSTANTIATE_TEST_SUITE_P(Gpu, BlaBackwardCuda,
                         ::testing::Combine(::testing::ValuesIn(kBlaBackwardShapes),
                                            ::testing::ValuesIn(cuda_variants(FSATTN_OP_BLA_BACKWARD)),
                                            ::testing::Bool()),
                         ShapeVariantStateName());

// The Li2018 builds compute the same function at the shape the baselines are built for.
TEST(CudaBaselines, MatchReference) {
  FSATTN_REQUIRE_GPU();
  if (!has_baselines(FSATTN_DEVICE_CUDA)) GTEST_SKIP() << kNoBaselines;
  const IdaCase ic = make_ida_case({2, 2048, 4, 64, 64, 64}, 17, true);
  const IdaUpstream iu = make_ida_upstream(ic, 18, true);
  for (const std::string &v : cuda_variants(FSATTN_OP_IDA_FORWARD, true)) {
    expect_match(gpu_ida_forward(ic, nullptr, v.c_str()), run_ida_forward(ic), kForwardTol, v);
  }
  for (const std::string &v : cuda_variants(FSATTN_OP_IDA_BACKWARD, true)) {
    expect_ida_grads_match(gpu_ida_backward(ic, iu, v.c_str()), run_ida_backward(ic, iu), kGradTol, v);
  }
  const BlaCase bc = make_bla_case({2, 2048, 4, 64, 64, 31, 256.0, 64}, 0, 19, 0.9, true);
  const BlaUpstream bu = make_bla_upstream(bc, 20, true);
  for (const std::string &v : cuda_variants(FSATTN_OP_BLA_FORWARD, true)) {
    expect_match(gpu_bla_forward(bc, nullptr, v.c_str()), run_bla_forward(bc), kForwardTol, v);
  }
  for (const std::string &v : cuda_variants(FSATTN_OP_BLA_BACKWARD, true)) {
    expect_grads_match(gpu_bla_backward(bc, bu, v.c_str()), run_bla_backward(bc, bu), kGradTol, v);
  }
}

// ---- properties --------------------------------------------------------------------------

TEST(CudaProperties, Deterministic) {
  FSATTN_REQUIRE_GPU();
  const IdaCase ic = make_ida_case({2, 300, 3, 32, 16, 16}, 5, true);
  const IdaUpstream iu = make_ida_upstream(ic, 6, true);
  const ForwardResult f1 = gpu_ida_forward(ic), f2 = gpu_ida_forward(ic);
  expect_bitwise(f1.o, f2.o, "IDA o");
  const IdaGradResult g1 = gpu_ida_backward(ic, iu), g2 = gpu_ida_backward(ic, iu);
  expect_bitwise(g1.q, g2.q, "IDA dq");
  expect_bitwise(g1.C, g2.C, "IDA dC");
  expect_bitwise(g1.log_dt, g2.log_dt, "IDA d log_dt");
  const BlaCase bc = make_bla_case({2, 300, 3, 32, 16, 15, 64.0, 31}, 9, 7, 0.9, true);
  const BlaUpstream bu = make_bla_upstream(bc, 8, true);
  expect_bitwise(gpu_bla_forward(bc).o, gpu_bla_forward(bc).o, "BLA o");
  const BlaGradResult h1 = gpu_bla_backward(bc, bu), h2 = gpu_bla_backward(bc, bu);
  expect_bitwise(h1.k, h2.k, "BLA dk");
  expect_bitwise(h1.log_gamma, h2.log_gamma, "BLA d log_gamma");
}

// Every chunk length and schedule computes the same function: the hand variants agree.
TEST(CudaProperties, VariantsAgree) {
  FSATTN_REQUIRE_GPU();
  const IdaCase ic = make_ida_case({2, 301, 2, 24, 20, 10}, 7, true);
  const ForwardResult ifirst = gpu_ida_forward(ic);
  for (const std::string &v : cuda_variants(FSATTN_OP_IDA_FORWARD)) {
    expect_match(gpu_ida_forward(ic, nullptr, v.c_str()), ifirst, kForwardTol, v);
  }
  const BlaCase bc = make_bla_case({2, 301, 2, 24, 20, 9, 50.5, 19}, 33, 8, 0.9, true);
  const ForwardResult bfirst = gpu_bla_forward(bc);
  for (const std::string &v : cuda_variants(FSATTN_OP_BLA_FORWARD)) {
    expect_match(gpu_bla_forward(bc, nullptr, v.c_str()), bfirst, kForwardTol, v);
  }
}

// T tokens in one call equal two calls passing the final state on (pos0 advanced for BLA).
TEST(CudaProperties, StateChaining) {
  FSATTN_REQUIRE_GPU();
  const BlaCase whole = make_bla_case({2, 150, 2, 16, 12, 7, 37.5, 15}, 1000, 3, 0.9, true);
  const ForwardResult all = gpu_bla_forward(whole);
  ASSERT_EQ(all.status, FSATTN_OK) << fsattn_last_error();
  for (int64_t split : {1, 64, 100}) {
    BlaCase first = whole.tokens(0, split), second = whole.tokens(split, whole.s.T);
    const ForwardResult a = gpu_bla_forward(first);
    second.state_k.set(a.state_k);
    second.state_v.set(a.state_v);
    const ForwardResult b = gpu_bla_forward(second);
    ForwardResult joined{b.status, join_tokens(a.o, b.o, whole.s.B), b.state_k, b.state_v};
    expect_match(joined, all, kForwardTol, "split " + std::to_string(split));
  }
}

// A NaN or Inf in one input element reaches exactly the outputs that depend on it, as on the
// CPU (the register tiles compute whole chunks: a token's value must not reach the chunk's
// earlier outputs through a mask multiplied in).
TEST(CudaProperties, NonFiniteInputsStayLocal) {
  FSATTN_REQUIRE_GPU();
  check_poison(make_ida_case({2, 75, 2, 8, 6, 5}, 700, true), [](const IdaCase &c) { return gpu_ida_forward(c); });
  check_poison(make_bla_case({2, 75, 2, 8, 6, 4, 20.5, 9}, 3, 701, 0.9, true),
               [](const BlaCase &c) { return gpu_bla_forward(c); });
}

// A final state written over its initial state, and initial-state gradients written over
// the final-state gradients, give what separate buffers give.
TEST(CudaProperties, StatesInPlace) {
  FSATTN_REQUIRE_GPU();
  const IdaCase c = make_ida_case({2, 90, 2, 12, 10, 6}, 12, true);
  const ForwardResult want = gpu_ida_forward(c);
  DeviceArena a;
  const fsattn_ida_params p = device_params(a, c);
  float *sk = a.up(c.state_k), *sv = a.up(c.state_v), *o = a.out(want.o.size());
  const fsattn_exec exec = cuda_exec();
  const fsattn_dims dims = c.dims();
  ASSERT_EQ(FSATTN_OK, fsattn_ida_forward(&exec, &dims, &p, a.up(c.q), a.up(c.k), a.up(c.v), sk, sv, o, sk, sv))
      << fsattn_last_error();
  expect_bitwise(a.down(o), want.o, "o");
  expect_bitwise(a.down(sk), want.state_k, "state_k in place");
  expect_bitwise(a.down(sv), want.state_v, "state_v in place");

  const BlaCase bc = make_bla_case({1, 80, 2, 8, 8, 3, 16.0, 7}, 0, 13, 0.9, true);
  const BlaUpstream bu = make_bla_upstream(bc, 14, true);
  const BlaGradResult gwant = gpu_bla_backward(bc, bu);
  DeviceArena b;
  fsattn_bla_params bp = bc.params();
  bp.log_gamma = b.up(bc.log_gamma);
  const auto &s = bc.s;
  float *dq = b.out(gwant.q.size()), *dk = b.out(gwant.k.size()), *dv = b.out(gwant.v.size()), *dlg = b.out(s.H);
  float *seed_k = b.up(bu.d_state_k), *seed_v = b.up(bu.d_state_v);
  const fsattn_dims bdims = bc.dims();
  ASSERT_EQ(FSATTN_OK,
            fsattn_bla_backward(&exec, &bdims, &bp, b.up(bc.q), b.up(bc.k), b.up(bc.v), b.up(bc.state_k),
                                b.up(bc.state_v), b.up(bu.d_o), seed_k, seed_v, dq, dk, dv, dlg, seed_k, seed_v))
      << fsattn_last_error();
  expect_bitwise(b.down(dk), gwant.k, "dk");
  expect_bitwise(b.down(seed_k), gwant.state_k, "d_state_k in place");
  expect_bitwise(b.down(seed_v), gwant.state_v, "d_state_v in place");
}

// ---- a shape that fills the GPU, against the CPU kernels ---------------------------------

TEST(CudaLarge, MatchesCpuAtBenchmarkShape) {
  FSATTN_REQUIRE_GPU();
  // B=8, T=4096, H=16, D=64, 64 modes / slots: 2048 (batch, head, chunk) triples of 64 tokens.
  const IdaCase ic = make_ida_case({8, 4096, 16, 64, 64, 64}, 21, true);
  const ForwardResult ig = gpu_ida_forward(ic);
  expect_match(ig, run_ida_forward(ic), kForwardTol, "IDA forward");
  const BlaCase bc = make_bla_case({8, 4096, 16, 64, 64, 31, 256.0, 64}, 12345, 22, 0.9, true);
  expect_match(gpu_bla_forward(bc), run_bla_forward(bc), kForwardTol, "BLA forward");
  const BlaUpstream bu = make_bla_upstream(bc, 23, true);
  expect_grads_match(gpu_bla_backward(bc, bu), run_bla_backward(bc, bu), kGradTol, "BLA backward");
  const IdaCase small = make_ida_case({2, 4096, 16, 64, 64, 64}, 24, true);
  const IdaUpstream iu = make_ida_upstream(small, 25, true);
  expect_ida_grads_match(gpu_ida_backward(small, iu), run_ida_backward(small, iu), kGradTol, "IDA backward");
}

// ---- streams -----------------------------------------------------------------------------

// Two calls on two streams, queued before either is waited for, give the results each gives
// alone (the workspace of one stream is never handed to the other while in use).
TEST(CudaStreams, TwoStreamsRunDifferentCallsConcurrently) {
  FSATTN_REQUIRE_GPU();
  const cu::Driver *d = gpu();
  cu::Stream s1 = nullptr, s2 = nullptr;
  ASSERT_EQ(d->StreamCreate(&s1, cu::kStreamNonBlocking), cu::kSuccess);
  ASSERT_EQ(d->StreamCreate(&s2, cu::kStreamNonBlocking), cu::kSuccess);
  const IdaCase ic = make_ida_case({4, 2048, 8, 64, 64, 64}, 31, true);
  const BlaCase bc = make_bla_case({4, 2048, 8, 64, 64, 31, 256.0, 64}, 0, 32, 0.9, true);
  const ForwardResult ida_alone = gpu_ida_forward(ic), bla_alone = gpu_bla_forward(bc);

  DeviceArena a;
  const fsattn_ida_params ip = device_params(a, ic);
  fsattn_bla_params bp = bc.params();
  bp.log_gamma = a.up(bc.log_gamma);
  float *io = a.out(ida_alone.o.size()), *bo = a.out(bla_alone.o.size());
  float *isk = a.out(ida_alone.state_k.size()), *bsk = a.out(bla_alone.state_k.size());
  const fsattn_exec e1 = cuda_exec(s1), e2 = cuda_exec(s2);
  const fsattn_dims idims = ic.dims(), bdims = bc.dims();
  float *iq = a.up(ic.q), *ik = a.up(ic.k), *iv = a.up(ic.v), *iski = a.up(ic.state_k), *isvi = a.up(ic.state_v);
  float *bq = a.up(bc.q), *bk = a.up(bc.k), *bv = a.up(bc.v), *bski = a.up(bc.state_k), *bsvi = a.up(bc.state_v);
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(FSATTN_OK, fsattn_ida_forward(&e1, &idims, &ip, iq, ik, iv, iski, isvi, io, isk, nullptr))
        << fsattn_last_error();
    ASSERT_EQ(FSATTN_OK, fsattn_bla_forward(&e2, &bdims, &bp, bq, bk, bv, bski, bsvi, bo, bsk, nullptr))
        << fsattn_last_error();
  }
  ASSERT_EQ(d->StreamSynchronize(s1), cu::kSuccess);
  ASSERT_EQ(d->StreamSynchronize(s2), cu::kSuccess);
  expect_bitwise(a.down(io), ida_alone.o, "IDA o on stream 1");
  expect_bitwise(a.down(isk), ida_alone.state_k, "IDA state_k on stream 1");
  expect_bitwise(a.down(bo), bla_alone.o, "BLA o on stream 2");
  expect_bitwise(a.down(bsk), bla_alone.state_k, "BLA state_k on stream 2");
  d->StreamDestroy(s1);
  d->StreamDestroy(s2);
}

// ---- decode steps ------------------------------------------------------------------------

// Each step of case c's token sequence, on the GPU (`variant`) and on the CPU, states in
// place on both: step(exec, dims, t, q, k, v, state_k, state_v, o) makes token t's call of
// the mixer's step function on exec's device (with that device's parameters). The shapes
// (below): modes, slots and channels below 16, odd counts above it, the largest features,
// and one of everything.
template <typename Case, typename Step>
void check_steps_against_cpu(const Case &c, DeviceArena &a, const std::string &variant, const char *mixer,
                             const Step &step) {
  const fsattn_exec cpu{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr},
      gpu_exec = cuda_exec(nullptr, variant.c_str());
  std::vector<float> sk = c.state_k.f, sv = c.state_v.f;
  float *dsk = a.up(sk), *dsv = a.up(sv);
  fsattn_dims dims = c.dims();
  dims.seqlen = 1;
  const auto &s = c.s;
  for (int64_t t = 0; t < s.T; ++t) {
    const Tensor32 q = slice_tokens(c.q, s.B, s.T, s.H, s.Dk, t, t + 1),
                   k = slice_tokens(c.k, s.B, s.T, s.H, s.Dk, t, t + 1);
    const Tensor32 v = slice_tokens(c.v, s.B, s.T, s.H, s.Dv, t, t + 1);
    std::vector<float> o(s.B * s.H * s.Dv, NAN);
    float *od = a.out(o.size());
    ASSERT_EQ(FSATTN_OK, step(cpu, dims, t, q.ptr(), k.ptr(), v.ptr(), sk.data(), sv.data(), o.data()));
    ASSERT_EQ(FSATTN_OK, step(gpu_exec, dims, t, a.up(q), a.up(k), a.up(v), dsk, dsv, od)) << fsattn_last_error();
    EXPECT_LE(rel_error(a.down(od), o), kForwardTol) << variant << ": " << mixer << " o at token " << t;
  }
  EXPECT_LE(rel_error(a.down(dsk), sk), kForwardTol) << variant;
  EXPECT_LE(rel_error(a.down(dsv), sv), kForwardTol) << variant;
}

void check_ida_steps_against_cpu(ref::IdaShape shape, const std::string &variant) {
  const IdaCase c = make_ida_case(shape, 41, true);
  DeviceArena a;
  const fsattn_ida_params p_host = c.params(), p_dev = device_params(a, c);
  check_steps_against_cpu(c, a, variant, "IDA",
                          [&](const fsattn_exec &e, const fsattn_dims &d, int64_t, const float *q, const float *k,
                              const float *v, float *sk, float *sv, float *o) {
                            const fsattn_ida_params *p = e.device == FSATTN_DEVICE_CUDA ? &p_dev : &p_host;
                            return fsattn_ida_step(&e, &d, p, q, k, v, sk, sv, o);
                          });
}

void check_bla_steps_against_cpu(ref::BlaShape shape, const std::string &variant) {
  const BlaCase c = make_bla_case(shape, 77, 42, 0.9, true);
  DeviceArena a;
  const float *log_gamma_dev = a.up(c.log_gamma);
  check_steps_against_cpu(c, a, variant, "BLA",
                          [&](const fsattn_exec &e, const fsattn_dims &d, int64_t t, const float *q, const float *k,
                              const float *v, float *sk, float *sv, float *o) {
                            fsattn_bla_params p = c.params();
                            p.pos0 = c.pos0 + t;
                            if (e.device == FSATTN_DEVICE_CUDA) p.log_gamma = log_gamma_dev;
                            return fsattn_bla_step(&e, &d, &p, q, k, v, sk, sv, o);
                          });
}

class IdaStepCuda : public ::testing::TestWithParam<std::string> {};
TEST_P(IdaStepCuda, MatchesCpuSteps) {
  FSATTN_REQUIRE_GPU();
  check_ida_steps_against_cpu({3, 6, 4, 16, 12, 8}, GetParam());
  check_ida_steps_against_cpu({2, 4, 3, 40, 33, 37}, GetParam());     // several tiles of every kind
  check_ida_steps_against_cpu({1, 3, 2, 256, 256, 256}, GetParam());  // the largest features
  check_ida_steps_against_cpu({1, 3, 1, 1, 1, 1}, GetParam());        // one of everything
}
INSTANTIATE_TEST_SUITE_P(Gpu, IdaStepCuda, ::testing::ValuesIn(cuda_variants(FSATTN_OP_IDA_STEP)));

class BlaStepCuda : public ::testing::TestWithParam<std::string> {};
TEST_P(BlaStepCuda, MatchesCpuSteps) {
  FSATTN_REQUIRE_GPU();
  check_bla_steps_against_cpu({3, 6, 4, 16, 12, 5, 19.5, 11}, GetParam());
  check_bla_steps_against_cpu({2, 4, 3, 41, 35, 21, 40.0, 37}, GetParam());
  check_bla_steps_against_cpu({1, 3, 2, 256, 256, 127, 512.0, 256}, GetParam());
  check_bla_steps_against_cpu({1, 3, 1, 1, 1, 0, 1.0, 1}, GetParam());
}
INSTANTIATE_TEST_SUITE_P(Gpu, BlaStepCuda, ::testing::ValuesIn(cuda_variants(FSATTN_OP_BLA_STEP)));

// ---- argument checks on device memory -----------------------------------------------------

TEST(CudaArguments, HostAndShortBuffersAreRefused) {
  FSATTN_REQUIRE_GPU();
  const BlaCase c = make_bla_case({1, 40, 2, 8, 8, 3, 16.0, 7}, 0, 51, 0.9, false);
  DeviceArena a;
  fsattn_bla_params p = c.params();
  p.log_gamma = a.up(c.log_gamma);
  const fsattn_exec exec = cuda_exec();
  const fsattn_dims dims = c.dims();
  float *q = a.up(c.q), *k = a.up(c.k), *v = a.up(c.v), *o = a.out(c.q.f.size());
  // A host pointer where device memory is due.
  std::vector<float> host_o(c.q.f.size());
  EXPECT_EQ(FSATTN_ERROR_INVALID_ARGUMENT,
            fsattn_bla_forward(&exec, &dims, &p, q, k, v, nullptr, nullptr, host_o.data(), nullptr, nullptr));
  EXPECT_NE(std::string(fsattn_last_error()).find("not CUDA memory"), std::string::npos) << fsattn_last_error();
  // A device buffer shorter than its shape.
  float *short_k = a.out(c.k.f.size() / 2);
  EXPECT_EQ(FSATTN_ERROR_INVALID_ARGUMENT,
            fsattn_bla_forward(&exec, &dims, &p, q, short_k, v, nullptr, nullptr, o, nullptr, nullptr));
  EXPECT_NE(std::string(fsattn_last_error()).find("bytes"), std::string::npos) << fsattn_last_error();
  // A decay above 1 (log γ > 0), which the host cannot see in device memory, gives NaN.
  Tensor32 bad = c.log_gamma;
  bad.f[1] = 0.5f;
  p.log_gamma = a.up(bad);
  ASSERT_EQ(FSATTN_OK, fsattn_bla_forward(&exec, &dims, &p, q, k, v, nullptr, nullptr, o, nullptr, nullptr));
  const std::vector<float> out = a.down(o);
  for (size_t i = 0; i < out.size(); ++i) {
    const bool head1 = (i / c.s.Dv) % c.s.H == 1;
    ASSERT_EQ(std::isnan(out[i]), head1) << "element " << i;
  }
}

}  // namespace

namespace {

// Without a GPU (CI has none) a CUDA call reports the device as missing, with the reason.
TEST(CudaAbsent, CallsReportTheMissingDevice) {
  std::string why;
  if (fsattn::test::gpu(&why) != nullptr) GTEST_SKIP() << "a GPU is present";
  const BlaCase c = make_bla_case({1, 4, 1, 4, 4, 1, 8.0, 3}, 0, 1, 0.9, false);
  const fsattn_exec exec = cuda_exec();
  const fsattn_dims dims = c.dims();
  const fsattn_bla_params p = c.params();
  std::vector<float> o(c.v.f.size());
  EXPECT_EQ(FSATTN_ERROR_DEVICE, fsattn_bla_forward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), nullptr, nullptr,
                                                    o.data(), nullptr, nullptr));
  EXPECT_NE(std::string(fsattn_last_error()).find("CUDA is not available"), std::string::npos) << fsattn_last_error();
}

}  // namespace

namespace {

// More chunks than a CUDA grid dimension holds is refused before anything runs, with or
// without a GPU (the pointers are never read).
// Distinct addresses, never read: the calls below are refused before any memory is touched
// (an output at the same address as an input would be refused first, as overlapping).
float *far_address(int i) { return reinterpret_cast<float *>(uintptr_t(i + 1) << 40); }

TEST(CudaGrid, TooManyChunksAreRefused) {
  const BlaCase c = make_bla_case({1, 4, 1, 4, 4, 1, 8.0, 3}, 0, 1, 0.9, false);
  const fsattn_exec exec = cuda_exec();
  fsattn_dims dims = c.dims();
  dims.seqlen = int64_t(65535) * 64 + 1;
  const fsattn_bla_params p = c.params();
  EXPECT_EQ(FSATTN_ERROR_UNSUPPORTED,
            fsattn_bla_forward(&exec, &dims, &p, far_address(0), far_address(1), far_address(2), nullptr, nullptr,
                               far_address(3), nullptr, nullptr));
  EXPECT_NE(std::string(fsattn_last_error()).find("65535 chunks"), std::string::npos) << fsattn_last_error();
}

// ---- variable-length batches: the CUDA call against the CPU call on the same data --------
// Lengths 5, 0, 1, 34, 0, 40: empty and one-token sequences, and lengths across a chunk.
const std::vector<int64_t> kCu = {0, 5, 5, 6, 40, 40, 80};
constexpr int64_t kSeqs = 6, kT = 80;

// Host and device copies of one varlen call's buffers: inputs uploaded, outputs NaN.
struct Both {
  DeviceArena a;
  std::vector<std::vector<float>> host;
  std::vector<float *> dev;
  float *h(size_t i) { return host[i].empty() ? nullptr : host[i].data(); }
  float *d(size_t i) { return dev[i]; }
  size_t add(const std::vector<float> &x) {
    host.push_back(x);
    dev.push_back(x.empty() ? nullptr : a.up(x));
    return host.size() - 1;
  }
  size_t out(size_t n) { return add(std::vector<float>(n, NAN)); }
  std::vector<float> down(size_t i) { return a.down(dev[i]); }
};

TEST(CudaVarlen, BlaMatchesTheCpu) {
  FSATTN_REQUIRE_GPU();
  const BlaCase c = make_bla_case({kSeqs, kT, 2, 8, 6, 4, 13.5, 9}, 100, 61, 0.9, true);
  const BlaUpstream u = make_bla_upstream(c, 62, true);
  const size_t nk = 2 * 9 * 8, nv = 2 * 9 * 6, n = size_t(kT) * 2;
  Both m;
  const size_t q = m.add(std::vector<float>(c.q.f.begin(), c.q.f.begin() + n * 8)),
               k = m.add(std::vector<float>(c.k.f.begin(), c.k.f.begin() + n * 8)),
               v = m.add(std::vector<float>(c.v.f.begin(), c.v.f.begin() + n * 6)), lg = m.add(c.log_gamma.f),
               ski = m.add(c.state_k.f), svi = m.add(c.state_v.f),
               d_o = m.add(std::vector<float>(u.d_o.f.begin(), u.d_o.f.begin() + n * 6)), dsk = m.add(u.d_state_k.f),
               dsv = m.add(u.d_state_v.f);
  const size_t o = m.out(n * 6), sko = m.out(kSeqs * nk), svo = m.out(kSeqs * nv), dq = m.out(n * 8), dk = m.out(n * 8),
               dv = m.out(n * 6), dlg = m.out(2), dski = m.out(kSeqs * nk), dsvi = m.out(kSeqs * nv);
  fsattn_dims dims{sizeof(fsattn_dims), 1, kT, 2, 8, 6, kCu.data(), kSeqs};
  for (bool gpu_side : {false, true}) {
    const fsattn_exec exec{sizeof(fsattn_exec), gpu_side ? FSATTN_DEVICE_CUDA : FSATTN_DEVICE_CPU, nullptr, nullptr};
    auto at = [&](size_t i) { return gpu_side ? m.d(i) : m.h(i); };
    fsattn_bla_params p = c.params();
    p.log_gamma = at(lg);
    ASSERT_EQ(FSATTN_OK,
              fsattn_bla_forward(&exec, &dims, &p, at(q), at(k), at(v), at(ski), at(svi), at(o), at(sko), at(svo)))
        << fsattn_last_error();
    ASSERT_EQ(FSATTN_OK, fsattn_bla_backward(&exec, &dims, &p, at(q), at(k), at(v), at(ski), at(svi), at(d_o), at(dsk),
                                             at(dsv), at(dq), at(dk), at(dv), at(dlg), at(dski), at(dsvi)))
        << fsattn_last_error();
  }
  for (size_t i : {o, sko, svo}) EXPECT_LE(rel_error(m.down(i), m.host[i]), kForwardTol) << "output " << i;
  for (size_t i : {dq, dk, dv, dski, dsvi}) EXPECT_LE(grad_error(m.down(i), m.host[i]), kGradTol) << "gradient " << i;
  EXPECT_LE(grad_error(m.down(dlg), m.host[dlg], 1e-2), kGradTol);
  // The empty sequences (1 and 4) pass their states and their gradients through unchanged.
  const std::vector<float> sk_gpu = m.down(sko), dsv_gpu = m.down(dsvi);
  for (int64_t s : {1, 4}) {
    EXPECT_TRUE(std::equal(sk_gpu.begin() + s * nk, sk_gpu.begin() + (s + 1) * nk, c.state_k.f.begin() + s * nk));
    EXPECT_TRUE(std::equal(dsv_gpu.begin() + s * nv, dsv_gpu.begin() + (s + 1) * nv, u.d_state_v.f.begin() + s * nv));
  }
}

// Every buffer of a variable-length CUDA call is checked whole before any work: the states of
// the empty last sequence (copied with no call of its own) and d log γ (copied from the one
// sequence's gradient) were not, and a host pointer there went unnoticed.
TEST(CudaVarlen, BuffersAreCheckedWhole) {
  FSATTN_REQUIRE_GPU();
  const BlaCase c = make_bla_case({kSeqs, kT, 2, 8, 6, 4, 13.5, 9}, 100, 61, 0.9, true);
  const size_t nk = 2 * 9 * 8, nv = 2 * 9 * 6, n = size_t(kT) * 2;
  DeviceArena a;
  float *q = a.up(std::vector<float>(c.q.f.begin(), c.q.f.begin() + n * 8)),
        *k = a.up(std::vector<float>(c.k.f.begin(), c.k.f.begin() + n * 8)),
        *v = a.up(std::vector<float>(c.v.f.begin(), c.v.f.begin() + n * 6));
  const std::vector<int64_t> cu = {0, 40, kT, kT};  // the last of three sequences empty
  float *o = a.out(n * 6), *sko = a.out(3 * nk), *short_svo = a.out(2 * nv);
  float *dq = a.out(n * 8), *dk = a.out(n * 8), *dv = a.out(n * 6), *d_o = a.up(std::vector<float>(n * 6, 0.5f));
  fsattn_bla_params p = c.params();
  p.log_gamma = a.up(c.log_gamma);
  const fsattn_dims dims{sizeof(fsattn_dims), 1, kT, 2, 8, 6, cu.data(), 3};
  const fsattn_exec exec = cuda_exec();
  EXPECT_EQ(FSATTN_ERROR_INVALID_ARGUMENT,
            fsattn_bla_forward(&exec, &dims, &p, q, k, v, nullptr, nullptr, o, sko, short_svo));
  EXPECT_NE(std::string(fsattn_last_error()).find("state_v_out"), std::string::npos) << fsattn_last_error();
  std::vector<float> host_dlg(2, 7.0f);
  EXPECT_EQ(FSATTN_ERROR_INVALID_ARGUMENT,
            fsattn_bla_backward(&exec, &dims, &p, q, k, v, nullptr, nullptr, d_o, nullptr, nullptr, dq, dk, dv,
                                host_dlg.data(), nullptr, nullptr));
  EXPECT_NE(std::string(fsattn_last_error()).find("d_log_gamma"), std::string::npos) << fsattn_last_error();
  EXPECT_EQ(host_dlg, std::vector<float>(2, 7.0f));
  for (float *out : {o, sko, short_svo, dq, dk, dv}) {
    for (float x : a.down(out)) ASSERT_TRUE(std::isnan(x)) << "a refused call wrote an output";
  }
}

TEST(CudaVarlen, IdaMatchesTheCpu) {
  FSATTN_REQUIRE_GPU();
  const IdaCase c = make_ida_case({kSeqs, kT, 2, 8, 6, 5}, 71, true);
  const IdaUpstream u = make_ida_upstream(c, 72, true);
  const size_t nk = 2 * 2 * 5 * 8, nv = 2 * 2 * 5 * 6, n = size_t(kT) * 2;
  Both m;
  const size_t q = m.add(std::vector<float>(c.q.f.begin(), c.q.f.begin() + n * 8)),
               k = m.add(std::vector<float>(c.k.f.begin(), c.k.f.begin() + n * 8)),
               v = m.add(std::vector<float>(c.v.f.begin(), c.v.f.begin() + n * 6)), ski = m.add(c.state_k.f),
               svi = m.add(c.state_v.f), d_o = m.add(std::vector<float>(u.d_o.f.begin(), u.d_o.f.begin() + n * 6)),
               dsk = m.add(u.d_state_k.f), dsv = m.add(u.d_state_v.f);
  const size_t first_param = m.host.size();
  for (const Tensor32 *t : {&c.gk, &c.bk, &c.gv, &c.bv, &c.log_dt, &c.A_re_log, &c.A_im, &c.B, &c.C}) m.add(t->f);
  const size_t o = m.out(n * 6), sko = m.out(kSeqs * nk), svo = m.out(kSeqs * nv), dq = m.out(n * 8), dk = m.out(n * 8),
               dv = m.out(n * 6), dski = m.out(kSeqs * nk), dsvi = m.out(kSeqs * nv);
  const size_t first_grad = m.host.size();
  for (size_t i = 0; i < 9; ++i) m.out(m.host[first_param + i].size());
  fsattn_dims dims{sizeof(fsattn_dims), 1, kT, 2, 8, 6, kCu.data(), kSeqs};
  for (bool gpu_side : {false, true}) {
    const fsattn_exec exec{sizeof(fsattn_exec), gpu_side ? FSATTN_DEVICE_CUDA : FSATTN_DEVICE_CPU, nullptr, nullptr};
    auto at = [&](size_t i) { return gpu_side ? m.d(i) : m.h(i); };
    const size_t P = first_param, G = first_grad;
    const fsattn_ida_params p{sizeof(fsattn_ida_params),
                              5,
                              c.eps,
                              at(P),
                              at(P + 1),
                              at(P + 2),
                              at(P + 3),
                              at(P + 4),
                              at(P + 5),
                              at(P + 6),
                              at(P + 7),
                              at(P + 8)};
    const fsattn_ida_grads g{sizeof(fsattn_ida_grads),
                             at(G),
                             at(G + 1),
                             at(G + 2),
                             at(G + 3),
                             at(G + 4),
                             at(G + 5),
                             at(G + 6),
                             at(G + 7),
                             at(G + 8)};
    ASSERT_EQ(FSATTN_OK,
              fsattn_ida_forward(&exec, &dims, &p, at(q), at(k), at(v), at(ski), at(svi), at(o), at(sko), at(svo)))
        << fsattn_last_error();
    ASSERT_EQ(FSATTN_OK, fsattn_ida_backward(&exec, &dims, &p, at(q), at(k), at(v), at(ski), at(svi), at(d_o), at(dsk),
                                             at(dsv), at(dq), at(dk), at(dv), &g, at(dski), at(dsvi)))
        << fsattn_last_error();
  }
  for (size_t i : {o, sko, svo}) EXPECT_LE(rel_error(m.down(i), m.host[i]), kForwardTol) << "output " << i;
  for (size_t i : {dq, dk, dv, dski, dsvi}) EXPECT_LE(grad_error(m.down(i), m.host[i]), kGradTol) << "gradient " << i;
  for (size_t i = 0; i < 9; ++i) {
    EXPECT_LE(grad_error(m.down(first_grad + i), m.host[first_grad + i], 1e-2), kGradTol) << "parameter " << i;
  }
}

// A step runs its heads and sequences along two grid dimensions: more than 65535 of either
// is refused, before any pointer is looked at.
TEST(CudaGrid, TooManyStepHeadsAreRefused) {
  const BlaCase c = make_bla_case({1, 1, 1, 4, 4, 1, 8.0, 3}, 0, 1, 0.9, true);
  const fsattn_exec exec = cuda_exec();
  fsattn_dims dims = c.dims();
  dims.heads = 65536;
  const fsattn_bla_params p = c.params();
  EXPECT_EQ(FSATTN_ERROR_UNSUPPORTED, fsattn_bla_step(&exec, &dims, &p, far_address(0), far_address(1), far_address(2),
                                                      far_address(3), far_address(4), far_address(5)));
  EXPECT_NE(std::string(fsattn_last_error()).find("65535 heads"), std::string::npos) << fsattn_last_error();
}

// The CUDA IDA step loads and stores each complex state element as one 8-byte vector: a state
// that is not 8-byte aligned is refused, before any pointer is read (with or without a GPU).
TEST(CudaArguments, MisalignedIdaStepStatesAreRefused) {
  const IdaCase c = make_ida_case({1, 1, 1, 4, 4, 2}, 3, true);
  const fsattn_exec exec = cuda_exec();
  const fsattn_dims dims = c.dims();
  const fsattn_ida_params p = c.params();
  alignas(8) float dummy[2] = {0, 0};
  for (const std::string state : {"state_k", "state_v"}) {
    float *sk = state == "state_k" ? &dummy[1] : &dummy[0], *sv = state == "state_v" ? &dummy[1] : &dummy[0];
    EXPECT_EQ(FSATTN_ERROR_INVALID_ARGUMENT, fsattn_ida_step(&exec, &dims, &p, dummy, dummy, dummy, sk, sv, dummy));
    EXPECT_NE(std::string(fsattn_last_error()).find(state + " is not 8-byte aligned"), std::string::npos)
        << fsattn_last_error();
  }
}

}  // namespace
