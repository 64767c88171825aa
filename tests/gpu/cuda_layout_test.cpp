// Strided activations (dims->layout) on CUDA: the CPU suite's layout checks over device
// memory (every op bitwise equal to its dense call, nothing written between elements), and
// device buffers checked over the span their strides reach.
#include "device.h"
#include "layout_cases.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace fsattn::test;

namespace {

bool no_gpu(std::string *why) { return fsattn::test::gpu(why) == nullptr; }

TEST(CudaLayout, EveryOpMatchesItsDenseCall) {
  std::string why;
  if (no_gpu(&why)) GTEST_SKIP() << why;
  DeviceArena a;
  const fsattn_exec exec = cuda_exec();
  const IdaCase ic = make_ida_case({2, 37, 3, 16, 24, 8}, 81, true);
  const BlaCase bc = make_bla_case({2, 37, 3, 16, 24, 5, 20.5, 8}, 3, 82, 0.5, true);
  const auto &is = ic.s;
  const auto &bs = bc.s;
  check_forward_layout(a, exec, ic, fsattn_ida_forward, size_t(is.B * is.H * is.M * is.Dk * 2),
                       size_t(is.B * is.H * is.M * is.Dv * 2));
  check_forward_layout(a, exec, bc, fsattn_bla_forward, size_t(bs.B * bs.H * bs.S * bs.Dk),
                       size_t(bs.B * bs.H * bs.S * bs.Dv));
  check_ida_backward_layout(a, exec, ic);
  check_bla_backward_layout(a, exec, bc);
  check_step_layout(a, exec, make_ida_case({3, 1, 2, 8, 12, 4}, 83, true), fsattn_ida_step);
  check_step_layout(a, exec, make_bla_case({3, 1, 2, 8, 12, 3, 7.5, 5}, 9, 84, 0.5, true), fsattn_bla_step);
}

TEST(CudaLayout, VarlenMatchesItsDenseCall) {
  std::string why;
  if (no_gpu(&why)) GTEST_SKIP() << why;
  DeviceArena a;
  const std::vector<int64_t> cu = {0, 5, 5, 40, 61};
  const int64_t seqs = int64_t(cu.size()) - 1;
  const IdaCase c = make_ida_case({1, 61, 2, 8, 12, 4}, 85, false);
  const auto &s = c.s;
  check_forward_layout(a, cuda_exec(), c, varlen(fsattn_ida_forward, cu), size_t(seqs * s.H * s.M * s.Dk * 2),
                       size_t(seqs * s.H * s.M * s.Dv * 2));
}

// A strided output must be device memory up to the last element its strides reach.
TEST(CudaLayout, BuffersAreCheckedOverTheirSpan) {
  std::string why;
  if (no_gpu(&why)) GTEST_SKIP() << why;
  DeviceArena a;
  const BlaCase c = make_bla_case({2, 9, 3, 8, 8, 2, 6.5, 4}, 0, 86, 0.5, false);
  const auto &s = c.s;
  const fsattn_bla_params p = params_in(a, c);
  const Placement po = head_major(s.B, s.T, s.H, s.Dv, 4);
  fsattn_layout l = FSATTN_LAYOUT_INIT;
  l.o = po.s;
  fsattn_dims dims = c.dims();
  dims.layout = &l;
  const fsattn_exec exec = cuda_exec();
  float *short_o = a.out(size_t(po.end() - 1));
  EXPECT_EQ(fsattn_bla_forward(&exec, &dims, &p, a.up(c.q), a.up(c.k), a.up(c.v), nullptr, nullptr, short_o, nullptr,
                               nullptr),
            FSATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fsattn_last_error()).find("o needs"), std::string::npos) << fsattn_last_error();
  for (float e : a.down(short_o)) ASSERT_TRUE(std::isnan(e));
  float *o = a.out(size_t(po.end()));
  EXPECT_EQ(
      fsattn_bla_forward(&exec, &dims, &p, a.up(c.q), a.up(c.k), a.up(c.v), nullptr, nullptr, o, nullptr, nullptr),
      FSATTN_OK)
      << fsattn_last_error();
}

}  // namespace
