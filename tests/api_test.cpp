// The C API's contract: every invalid argument is refused with its status and a message that
// names it, before anything is written; unimplemented calls say so.
#include "test_util.h"

#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <thread>

using namespace fsattn;
using namespace fsattn::test;

namespace {

struct Call {
  IdaCase c = make_ida_case({2, 5, 2, 4, 3, 2}, 1, true);
  fsattn_exec exec{FSATTN_DEVICE_CPU, nullptr, nullptr};
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

struct BadCase {
  const char *name;
  std::function<void(Call &)> spoil;
  fsattn_status status;
  const char *message;  // a substring of the message
};

const BadCase kBad[] = {
    {"null_exec", [](Call &c) { c.e = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "exec is NULL"},
    {"bad_device", [](Call &c) { c.exec.device = fsattn_device(7); }, FSATTN_ERROR_INVALID_ARGUMENT, "exec->device"},
    {"null_dims", [](Call &c) { c.d = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "dims is NULL"},
    {"null_params", [](Call &c) { c.pp = nullptr; }, FSATTN_ERROR_INVALID_ARGUMENT, "p is NULL"},
    {"zero_batch", [](Call &c) { c.dims.batch = 0; }, FSATTN_ERROR_INVALID_ARGUMENT, "dims->batch"},
    {"negative_seqlen", [](Call &c) { c.dims.seqlen = -3; }, FSATTN_ERROR_INVALID_ARGUMENT, "dims->seqlen"},
    {"zero_heads", [](Call &c) { c.dims.heads = 0; }, FSATTN_ERROR_INVALID_ARGUMENT, "dims->heads"},
    {"zero_dk", [](Call &c) { c.dims.dk = 0; }, FSATTN_ERROR_INVALID_ARGUMENT, "dims->dk"},
    {"huge_dv", [](Call &c) { c.dims.dv = 257; }, FSATTN_ERROR_INVALID_ARGUMENT, "dims->dv"},
    {"too_many_heads", [](Call &c) { c.dims.heads = FSATTN_MAX_HEADS + 1; }, FSATTN_ERROR_INVALID_ARGUMENT, "dims->heads"},
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
    {"unknown_variant", [](Call &c) { c.exec.variant = "no_such_schedule"; }, FSATTN_ERROR_INVALID_ARGUMENT, "no_such_schedule"},
    {"cuda_not_built", [](Call &c) { c.exec.device = FSATTN_DEVICE_CUDA; }, FSATTN_ERROR_UNSUPPORTED, "CUDA"},
    {"varlen_not_yet",
     [](Call &c) {
       static const int64_t cu[] = {0, 5};
       c.dims.batch = 1;
       c.dims.cu_seqlens = cu;
       c.dims.num_seqs = 1;
     },
     FSATTN_ERROR_UNSUPPORTED, "cu_seqlens"},
};

class IdaForwardInvalid : public ::testing::TestWithParam<BadCase> {};

TEST_P(IdaForwardInvalid, RefusedWithMessageAndNothingWritten) {
  const BadCase &bad = GetParam();
  Call call;
  bad.spoil(call);
  EXPECT_EQ(call.run(), bad.status);
  std::string msg = fsattn_last_error();
  EXPECT_NE(msg.find("fsattn_ida_forward"), std::string::npos) << msg;
  EXPECT_NE(msg.find(bad.message), std::string::npos) << msg;
  for (float x : call.o) ASSERT_EQ(x, 42.0f);
}

INSTANTIATE_TEST_SUITE_P(Api, IdaForwardInvalid, ::testing::ValuesIn(kBad),
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

TEST(Api, NotYetImplementedCallsSaySo) {
  fsattn_exec exec{FSATTN_DEVICE_CPU, nullptr, nullptr};
  EXPECT_EQ(FSATTN_ERROR_UNSUPPORTED,
            fsattn_bla_forward(&exec, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                               nullptr, nullptr));
  EXPECT_NE(std::string(fsattn_last_error()).find("fsattn_bla_forward"), std::string::npos);
  EXPECT_EQ(FSATTN_ERROR_UNSUPPORTED, fsattn_ida_step(&exec, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                      nullptr, nullptr, nullptr));
  EXPECT_NE(std::string(fsattn_last_error()).find("fsattn_ida_step"), std::string::npos);
}

TEST(Api, VariantsAreListed) {
  ASSERT_GE(fsattn_variant_count(FSATTN_OP_IDA_FORWARD, FSATTN_DEVICE_CPU), 3);
  EXPECT_STREQ(fsattn_variant_name(FSATTN_OP_IDA_FORWARD, FSATTN_DEVICE_CPU, 0), "cpu_c32");
  EXPECT_EQ(fsattn_variant_name(FSATTN_OP_IDA_FORWARD, FSATTN_DEVICE_CPU, 1000), nullptr);
  EXPECT_EQ(fsattn_variant_name(FSATTN_OP_IDA_FORWARD, FSATTN_DEVICE_CPU, -1), nullptr);
  EXPECT_STRNE(fsattn_version(), "");
}

}  // namespace
