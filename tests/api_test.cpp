// The C API's contract: every invalid argument is refused with its status and a message that
// names it, before anything is written; unimplemented calls say so.
#include "cases.h"

#ifdef FSATTN_TEST_CUDA
#include "cuda_driver.h"
#endif

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <thread>

using namespace fsattn;
using namespace fsattn::test;

namespace {

// What a CUDA call over host memory returns: UNSUPPORTED in a build without CUDA kernels,
// DEVICE where there is no NVIDIA driver or GPU (CI), and INVALID_ARGUMENT where there is
// one (host pointers are refused); the message names CUDA in each case.
fsattn_status cuda_on_host_memory() {
#ifdef FSATTN_TEST_CUDA
  return cu::driver(nullptr) != nullptr ? FSATTN_ERROR_INVALID_ARGUMENT : FSATTN_ERROR_DEVICE;
#else
  return FSATTN_ERROR_UNSUPPORTED;
#endif
}

struct IdaCall {
  static constexpr const char *kFunction = "fsattn_ida_forward";
  IdaCase c = make_ida_case({2, 5, 2, 4, 3, 2}, 1, true);
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  fsattn_dims dims = c.dims();
  fsattn_ida_params p = c.params();
  const float *q = c.q.ptr(), *k = c.k.ptr(), *v = c.v.ptr();
  std::vector<float> o = std::vector<float>(2 * 5 * 2 * 3, 42.0f);
  fsattn_exec *e = &exec;
  fsattn_dims *d = &dims;
  fsattn_ida_params *pp = &p;
  float *out = o.data();

  fsattn_status run() {
    return fsattn_ida_forward(e, d, pp, q, k, v, c.state_k.ptr(), c.state_v.ptr(), out, nullptr, nullptr);
  }
};

template <typename CallT>
struct BadCase {
  const char *name;
  std::function<void(CallT &)> spoil;
  fsattn_status status;
  const char *message;  // a substring of the message
};

// Runs a spoiled call: the status, the function and argument named, nothing written.
template <typename CallT>
void expect_refused(const BadCase<CallT> &bad) {
  CallT call;
  bad.spoil(call);
  EXPECT_EQ(call.run(), bad.status);
  std::string msg = fsattn_last_error();
  EXPECT_NE(msg.find(CallT::kFunction), std::string::npos) << msg;
  EXPECT_NE(msg.find(bad.message), std::string::npos) << msg;
  for (float x : call.o) ASSERT_EQ(x, 42.0f);
}

using Call = IdaCall;
const BadCase<IdaCall> kBad[] = {
    {"null_exec", [](Call &c) { c.e = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "exec is NULL"},
    {"bad_device", [](Call &c) { c.exec.device = fsattn_device(7); }, FSATTN_ERROR_INVALID_ARGUMENT, "exec->device"},
    {"null_dims", [](Call &c) { c.d = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "dims is NULL"},
    {"null_params", [](Call &c) { c.pp = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "p is NULL"},
    {"zero_batch", [](Call &c) { c.dims.batch = 0; }, FSATTN_ERROR_INVALID_ARGUMENT, "dims->batch"},
    {"negative_seqlen", [](Call &c) { c.dims.seqlen = -3; }, FSATTN_ERROR_INVALID_ARGUMENT, "dims->seqlen"},
    {"zero_heads", [](Call &c) { c.dims.heads = 0; }, FSATTN_ERROR_INVALID_ARGUMENT, "dims->heads"},
    {"zero_dk", [](Call &c) { c.dims.dk = 0; }, FSATTN_ERROR_INVALID_ARGUMENT, "dims->dk"},
    {"huge_dv", [](Call &c) { c.dims.dv = 257; }, FSATTN_ERROR_INVALID_ARGUMENT, "dims->dv"},
    {"too_many_heads", [](Call &c) { c.dims.heads = FSATTN_MAX_HEADS + 1; }, FSATTN_ERROR_INVALID_ARGUMENT,
     "dims->heads"},
    {"huge_seqlen", [](Call &c) { c.dims.seqlen = int64_t(1) << 40; }, FSATTN_ERROR_INVALID_ARGUMENT, "dims->seqlen"},
    {"overflowing_size",
     [](Call &c) {
       c.dims.batch = std::numeric_limits<int32_t>::max();
       c.dims.seqlen = std::numeric_limits<int32_t>::max();
       c.dims.heads = FSATTN_MAX_HEADS;
       c.dims.dk = 256;
     },
     FSATTN_ERROR_INVALID_ARGUMENT, "overflows"},
    {"too_large_size",
     [](Call &c) {
       c.dims.batch = std::numeric_limits<int32_t>::max();
       c.dims.seqlen = int64_t(1) << 20;
       c.dims.heads = 16;
       c.dims.dk = 16;
     },
     FSATTN_ERROR_INVALID_ARGUMENT, "address space"},
    {"zero_modes", [](Call &c) { c.p.modes = 0; }, FSATTN_ERROR_INVALID_ARGUMENT, "p->modes"},
    {"huge_modes", [](Call &c) { c.p.modes = 300; }, FSATTN_ERROR_INVALID_ARGUMENT, "p->modes"},
    {"nan_eps", [](Call &c) { c.p.eps = NAN; }, FSATTN_ERROR_INVALID_ARGUMENT, "p->eps"},
    {"inf_eps", [](Call &c) { c.p.eps = INFINITY; }, FSATTN_ERROR_INVALID_ARGUMENT, "p->eps"},
    {"null_q", [](Call &c) { c.q = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "q is NULL"},
    {"null_k", [](Call &c) { c.k = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "k is NULL"},
    {"null_v", [](Call &c) { c.v = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "v is NULL"},
    {"null_o", [](Call &c) { c.out = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "o is NULL"},
    {"null_gk", [](Call &c) { c.p.gk = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "p->gk is NULL"},
    {"null_bk", [](Call &c) { c.p.bk = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "p->bk is NULL"},
    {"null_gv", [](Call &c) { c.p.gv = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "p->gv is NULL"},
    {"null_bv", [](Call &c) { c.p.bv = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "p->bv is NULL"},
    {"null_log_dt", [](Call &c) { c.p.log_dt = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "p->log_dt is NULL"},
    {"null_A_re_log", [](Call &c) { c.p.A_re_log = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "p->A_re_log is NULL"},
    {"null_A_im", [](Call &c) { c.p.A_im = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "p->A_im is NULL"},
    {"null_B", [](Call &c) { c.p.B = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "p->B is NULL"},
    {"null_C", [](Call &c) { c.p.C = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "p->C is NULL"},
    {"unknown_variant", [](Call &c) { c.exec.variant = "no_such_schedule"; }, FSATTN_ERROR_INVALID_ARGUMENT,
     "no_such_schedule"},
    {"cuda_host_memory", [](Call &c) { c.exec.device = FSATTN_DEVICE_CUDA; }, cuda_on_host_memory(), "CUDA"},
    {"varlen_past_seqlen",
     [](Call &c) {
       static const int64_t cu[] = {0, int64_t(1) << 20};
       c.dims.batch = 1;
       c.dims.cu_seqlens = cu;
       c.dims.num_seqs = 1;
     },
     FSATTN_ERROR_INVALID_ARGUMENT, "cu_seqlens[num_seqs]"},
};

class IdaForwardInvalid : public ::testing::TestWithParam<BadCase<IdaCall>> {};
TEST_P(IdaForwardInvalid, RefusedWithMessageAndNothingWritten) { expect_refused(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Api, IdaForwardInvalid, ::testing::ValuesIn(kBad),
                         [](const auto &info) { return std::string(info.param.name); });

struct BlaCall {
  static constexpr const char *kFunction = "fsattn_bla_forward";
  BlaCase c = make_bla_case({2, 5, 2, 4, 3, 2, 7.5, 6}, 3, 1, 0.9, true);
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  fsattn_dims dims = c.dims();
  fsattn_bla_params p = c.params();
  std::vector<float> log_gamma = c.log_gamma.f;
  const float *q = c.q.ptr(), *k = c.k.ptr(), *v = c.v.ptr();
  std::vector<float> o = std::vector<float>(2 * 5 * 2 * 3, 42.0f);
  float *out = o.data();

  fsattn_status run() {
    p.log_gamma = p.log_gamma ? log_gamma.data() : nullptr;
    return fsattn_bla_forward(&exec, &dims, &p, q, k, v, c.state_k.ptr(), c.state_v.ptr(), out, nullptr, nullptr);
  }
};

const BadCase<BlaCall> kBadBla[] = {
    {"bad_device", [](BlaCall &c) { c.exec.device = fsattn_device(-1); }, FSATTN_ERROR_INVALID_ARGUMENT,
     "exec->device"},
    {"zero_batch", [](BlaCall &c) { c.dims.batch = 0; }, FSATTN_ERROR_INVALID_ARGUMENT, "dims->batch"},
    {"huge_dk", [](BlaCall &c) { c.dims.dk = 1000; }, FSATTN_ERROR_INVALID_ARGUMENT, "dims->dk"},
    {"negative_modes", [](BlaCall &c) { c.p.modes = -1; }, FSATTN_ERROR_INVALID_ARGUMENT, "modes"},
    {"huge_modes", [](BlaCall &c) { c.p.modes = 257; }, FSATTN_ERROR_INVALID_ARGUMENT, "modes"},
    {"zero_slots", [](BlaCall &c) { c.p.slots = 0; }, FSATTN_ERROR_INVALID_ARGUMENT, "slots"},
    {"huge_slots", [](BlaCall &c) { c.p.slots = 257; }, FSATTN_ERROR_INVALID_ARGUMENT, "slots"},
    {"zero_period", [](BlaCall &c) { c.p.period = 0; }, FSATTN_ERROR_INVALID_ARGUMENT, "period"},
    {"negative_period", [](BlaCall &c) { c.p.period = -4; }, FSATTN_ERROR_INVALID_ARGUMENT, "period"},
    {"tiny_period", [](BlaCall &c) { c.p.period = 1e-9; }, FSATTN_ERROR_INVALID_ARGUMENT, "period"},
    {"nan_period", [](BlaCall &c) { c.p.period = NAN; }, FSATTN_ERROR_INVALID_ARGUMENT, "period"},
    {"inf_period", [](BlaCall &c) { c.p.period = INFINITY; }, FSATTN_ERROR_INVALID_ARGUMENT, "period"},
    {"negative_pos0", [](BlaCall &c) { c.p.pos0 = -1; }, FSATTN_ERROR_INVALID_ARGUMENT, "p->pos0"},
    {"pos0_past_2_53", [](BlaCall &c) { c.p.pos0 = (int64_t(1) << 53) - 2; }, FSATTN_ERROR_INVALID_ARGUMENT, "p->pos0"},
    {"nan_scale", [](BlaCall &c) { c.p.scale = NAN; }, FSATTN_ERROR_INVALID_ARGUMENT, "p->scale"},
    {"null_log_gamma", [](BlaCall &c) { c.p.log_gamma = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT,
     "p->log_gamma is NULL"},
    {"positive_log_gamma", [](BlaCall &c) { c.log_gamma[1] = 0.5f; }, FSATTN_ERROR_INVALID_ARGUMENT, "p->log_gamma[1]"},
    {"nan_log_gamma", [](BlaCall &c) { c.log_gamma[0] = NAN; }, FSATTN_ERROR_INVALID_ARGUMENT, "p->log_gamma[0]"},
    {"minus_inf_log_gamma", [](BlaCall &c) { c.log_gamma[0] = -INFINITY; }, FSATTN_ERROR_INVALID_ARGUMENT,
     "p->log_gamma[0]"},
    {"null_q", [](BlaCall &c) { c.q = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "q is NULL"},
    {"null_k", [](BlaCall &c) { c.k = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "k is NULL"},
    {"null_v", [](BlaCall &c) { c.v = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "v is NULL"},
    {"null_o", [](BlaCall &c) { c.out = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "o is NULL"},
    {"unknown_variant", [](BlaCall &c) { c.exec.variant = "cpu_c7"; }, FSATTN_ERROR_INVALID_ARGUMENT, "cpu_c7"},
    {"cuda_host_memory", [](BlaCall &c) { c.exec.device = FSATTN_DEVICE_CUDA; }, cuda_on_host_memory(), "CUDA"},
};

class BlaForwardInvalid : public ::testing::TestWithParam<BadCase<BlaCall>> {};
TEST_P(BlaForwardInvalid, RefusedWithMessageAndNothingWritten) { expect_refused(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Api, BlaForwardInvalid, ::testing::ValuesIn(kBadBla),
                         [](const auto &info) { return std::string(info.param.name); });

struct InterpolateCall {
  static constexpr const char *kFunction = "fsattn_bla_interpolate";
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  int64_t batch = 2, heads = 3, dim = 4, modes = 2, slots = 5, position = 10, num_lags = 6;
  double period = 9.5;
  std::vector<double> lag_values = {0, 1, 2.5, 3, -1, 20};
  std::vector<float> state = std::vector<float>(2 * 3 * 5 * 4, 1.0f);
  std::vector<float> o = std::vector<float>(2 * 3 * 6 * 4, 42.0f);
  const double *lags = lag_values.data();
  const float *st = state.data();
  float *out = o.data();

  fsattn_status run() {
    return fsattn_bla_interpolate(&exec, batch, heads, dim, modes, period, slots, position, lags, num_lags, st, out);
  }
};

const BadCase<InterpolateCall> kBadInterpolate[] = {
    {"zero_batch", [](InterpolateCall &c) { c.batch = 0; }, FSATTN_ERROR_INVALID_ARGUMENT, "batch"},
    {"zero_heads", [](InterpolateCall &c) { c.heads = 0; }, FSATTN_ERROR_INVALID_ARGUMENT, "heads"},
    {"huge_dim", [](InterpolateCall &c) { c.dim = 257; }, FSATTN_ERROR_INVALID_ARGUMENT, "dim"},
    {"negative_modes", [](InterpolateCall &c) { c.modes = -2; }, FSATTN_ERROR_INVALID_ARGUMENT, "modes"},
    {"zero_slots", [](InterpolateCall &c) { c.slots = 0; }, FSATTN_ERROR_INVALID_ARGUMENT, "slots"},
    {"nan_period", [](InterpolateCall &c) { c.period = NAN; }, FSATTN_ERROR_INVALID_ARGUMENT, "period"},
    {"negative_position", [](InterpolateCall &c) { c.position = -5; }, FSATTN_ERROR_INVALID_ARGUMENT, "position"},
    {"zero_lags", [](InterpolateCall &c) { c.num_lags = 0; }, FSATTN_ERROR_INVALID_ARGUMENT, "num_lags"},
    {"nan_lag", [](InterpolateCall &c) { c.lag_values[3] = NAN; }, FSATTN_ERROR_INVALID_ARGUMENT, "lags[3]"},
    {"inf_lag", [](InterpolateCall &c) { c.lag_values[5] = -INFINITY; }, FSATTN_ERROR_INVALID_ARGUMENT, "lags[5]"},
    {"null_lags", [](InterpolateCall &c) { c.lags = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "lags is NULL"},
    {"null_state", [](InterpolateCall &c) { c.st = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "state is NULL"},
    {"null_out", [](InterpolateCall &c) { c.out = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "out is NULL"},
    {"no_cuda_kernel", [](InterpolateCall &c) { c.exec.device = FSATTN_DEVICE_CUDA; }, FSATTN_ERROR_UNSUPPORTED,
     "CUDA"},
};

class BlaInterpolateInvalid : public ::testing::TestWithParam<BadCase<InterpolateCall>> {};
TEST_P(BlaInterpolateInvalid, RefusedWithMessageAndNothingWritten) { expect_refused(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Api, BlaInterpolateInvalid, ::testing::ValuesIn(kBadInterpolate),
                         [](const auto &info) { return std::string(info.param.name); });

TEST(Api, SuccessClearsTheLastError) {
  Call bad;
  bad.q = nullptr;
  ASSERT_NE(bad.run(), FSATTN_OK);
  ASSERT_STRNE(fsattn_last_error(), "");
  Call good;
  ASSERT_EQ(good.run(), FSATTN_OK) << fsattn_last_error();
  EXPECT_STREQ(fsattn_last_error(), "");
}

TEST(Api, LastErrorIsPerThread) {
  Call bad;
  bad.q = nullptr;
  ASSERT_NE(bad.run(), FSATTN_OK);
  std::string other = "unset";
  std::thread([&] { other = fsattn_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_NE(std::string(fsattn_last_error()), "");
}

// A step over a variable-length batch is not served: refused as unsupported, with a message
// saying what; a CUDA step over host memory is refused as above.
TEST(Api, NotYetImplementedFeaturesSaySo) {
  BlaCase c = make_bla_case({1, 1, 1, 4, 4, 2, 8.0, 5}, 0, 1, 0.9, true);
  std::vector<float> sk = c.state_k.f, sv = c.state_v.f, o(4, 7.0f);
  fsattn_bla_params p = c.params();
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  const int64_t cu[] = {0, 1};
  fsattn_dims dims = c.dims();
  dims.cu_seqlens = cu;
  dims.num_seqs = 1;
  EXPECT_EQ(FSATTN_ERROR_UNSUPPORTED,
            fsattn_bla_step(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), sk.data(), sv.data(), o.data()));
  EXPECT_NE(std::string(fsattn_last_error()).find("cu_seqlens"), std::string::npos) << fsattn_last_error();
  fsattn_exec cuda{sizeof(fsattn_exec), FSATTN_DEVICE_CUDA, nullptr, nullptr};
  dims = c.dims();
  EXPECT_EQ(cuda_on_host_memory(),
            fsattn_bla_step(&cuda, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), sk.data(), sv.data(), o.data()));
  EXPECT_NE(std::string(fsattn_last_error()).find("CUDA"), std::string::npos) << fsattn_last_error();
  EXPECT_EQ(o, std::vector<float>(4, 7.0f));
}

TEST(Api, VariantsAreListed) {
  ASSERT_GE(fsattn_variant_count(FSATTN_OP_IDA_FORWARD, FSATTN_DEVICE_CPU), 3);
  EXPECT_STREQ(fsattn_variant_name(FSATTN_OP_IDA_FORWARD, FSATTN_DEVICE_CPU, 0), "cpu_c64");
  EXPECT_EQ(fsattn_variant_name(FSATTN_OP_IDA_FORWARD, FSATTN_DEVICE_CPU, 1000), nullptr);
  EXPECT_EQ(fsattn_variant_name(FSATTN_OP_IDA_FORWARD, FSATTN_DEVICE_CPU, -1), nullptr);
  EXPECT_EQ(fsattn_variant_name(FSATTN_OP_IDA_FORWARD, FSATTN_DEVICE_CPU, INT32_MIN), nullptr);  // found by the fuzzer
  EXPECT_STREQ(fsattn_variant_name(FSATTN_OP_BLA_FORWARD, FSATTN_DEVICE_CPU, 0), "cpu_c64");
  EXPECT_EQ(fsattn_variant_count(FSATTN_OP_BLA_INTERPOLATE, FSATTN_DEVICE_CPU), 1);
  EXPECT_STRNE(fsattn_version(), "");
}

}  // namespace
