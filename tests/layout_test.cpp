// Strided activations (dims->layout) on the CPU: every op gives, bitwise, what it gives on
// dense tensors, writes nothing between strided elements, and refuses layouts that would make
// an output share memory with itself or with another activation.
#include "layout_cases.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using namespace fsattn::test;

namespace {

const fsattn_exec kCpu{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};

TEST(Layout, IdaForward) {
  HostArena a;
  const IdaCase c = make_ida_case({2, 37, 3, 16, 24, 8}, 61, true);
  const auto &s = c.s;
  check_forward_layout(a, kCpu, c, fsattn_ida_forward, size_t(s.B * s.H * s.M * s.Dk * 2),
                       size_t(s.B * s.H * s.M * s.Dv * 2));
}

TEST(Layout, BlaForward) {
  HostArena a;
  const BlaCase c = make_bla_case({2, 37, 3, 16, 24, 5, 20.5, 8}, 3, 62, 0.5, true);
  const auto &s = c.s;
  check_forward_layout(a, kCpu, c, fsattn_bla_forward, size_t(s.B * s.H * s.S * s.Dk), size_t(s.B * s.H * s.S * s.Dv));
}

TEST(Layout, IdaBackward) {
  HostArena a;
  check_ida_backward_layout(a, kCpu, make_ida_case({2, 37, 3, 16, 24, 8}, 63, true));
}

TEST(Layout, BlaBackward) {
  HostArena a;
  check_bla_backward_layout(a, kCpu, make_bla_case({2, 37, 3, 16, 24, 5, 20.5, 8}, 3, 64, 0.5, true));
}

TEST(Layout, Steps) {
  HostArena a;
  check_step_layout(a, kCpu, make_ida_case({3, 1, 2, 8, 12, 4}, 65, true), fsattn_ida_step);
  check_step_layout(a, kCpu, make_bla_case({3, 1, 2, 8, 12, 3, 7.5, 5}, 9, 66, 0.5, true), fsattn_bla_step);
}

// A variable-length batch takes each sequence's tokens through the token stride.
TEST(Layout, Varlen) {
  HostArena a;
  const std::vector<int64_t> cu = {0, 5, 5, 40, 61};
  const int64_t seqs = int64_t(cu.size()) - 1;
  BlaCase c = make_bla_case({1, 61, 2, 8, 12, 3, 9.5, 5}, 0, 67, 0.5, false);
  const auto &s = c.s;
  const size_t nk = size_t(seqs * s.H * s.S * s.Dk), nv = size_t(seqs * s.H * s.S * s.Dv);
  check_forward_layout(a, kCpu, c, varlen(fsattn_bla_forward, cu), nk, nv);
}

// A refused call writes nothing; `why` is in the message.
void expect_refused(fsattn_status st, fsattn_status want, const std::vector<float> &untouched, const char *why) {
  EXPECT_EQ(st, want) << fsattn_last_error();
  EXPECT_NE(std::string(fsattn_last_error()).find(why), std::string::npos) << fsattn_last_error();
  for (float e : untouched) ASSERT_TRUE(std::isnan(e));
}

TEST(Layout, OverlapsAndBadStridesAreRefused) {
  const BlaCase c = make_bla_case({2, 9, 3, 8, 8, 2, 6.5, 4}, 0, 68, 0.5, false);
  const auto &s = c.s;
  const fsattn_bla_params p = c.params();
  std::vector<float> o(size_t(s.B * s.T * s.H * s.Dv), NAN);
  auto forward = [&](fsattn_layout l, const float *q, float *out) {
    fsattn_dims dims = c.dims();
    dims.layout = &l;
    return fsattn_bla_forward(&kCpu, &dims, &p, q, c.k.ptr(), c.v.ptr(), nullptr, nullptr, out, nullptr, nullptr);
  };
  fsattn_layout l = FSATTN_LAYOUT_INIT;
  l.q.token = -1;
  expect_refused(forward(l, c.q.ptr(), o.data()), FSATTN_ERROR_INVALID_ARGUMENT, o, "q.token = -1 is negative");
  l = FSATTN_LAYOUT_INIT;
  l.o.head = 1;  // heads one element apart: o's elements would share memory
  expect_refused(forward(l, c.q.ptr(), o.data()), FSATTN_ERROR_INVALID_ARGUMENT, o, "o's elements share memory");
  l = FSATTN_LAYOUT_INIT;
  l.o.token = int64_t(1) << 31;
  expect_refused(forward(l, c.q.ptr(), o.data()), FSATTN_ERROR_UNSUPPORTED, o, "above 2^31 - 1");
  l = FSATTN_LAYOUT_INIT;
  l.o.batch = std::numeric_limits<int64_t>::max() / 2;
  expect_refused(forward(l, c.q.ptr(), o.data()), FSATTN_ERROR_INVALID_ARGUMENT, o, "past the address space");
  // o over q itself, and o interleaved with q at different strides.
  std::vector<float> qo = c.q.f;
  EXPECT_EQ(forward(FSATTN_LAYOUT_INIT, qo.data(), qo.data()), FSATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(qo, c.q.f);
  const Placement pq = fused(0, 2, s.B, s.T, s.H, s.Dk), po = fused(1, 2, s.B, s.T, s.H, s.Dv);
  std::vector<float> both = scatter({{pq, &c.q.f}, {po, nullptr}});
  l = FSATTN_LAYOUT_INIT;
  l.q = pq.s, l.o = po.s;
  ASSERT_EQ(forward(l, both.data(), both.data() + po.offset), FSATTN_OK) << fsattn_last_error();  // disjoint
  l.o.head = s.Dv + 1;  // the same buffer at other strides: refused by address range
  std::vector<float> before = both;
  EXPECT_EQ(forward(l, both.data(), both.data() + po.offset), FSATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fsattn_last_error()).find("o shares memory with q"), std::string::npos);
  EXPECT_TRUE(same_bits(both, before));
  // dq and dk one element apart in a fused buffer: their elements meet.
  const BlaUpstream u = make_bla_upstream(c, 69, false);
  const Placement pdq = fused(0, 2, s.B, s.T, s.H, s.Dk);
  std::vector<float> dqk(size_t(pdq.end() + 1), NAN), dv(size_t(s.B * s.T * s.H * s.Dv), NAN), dlg(size_t(s.H), NAN);
  l = FSATTN_LAYOUT_INIT;
  l.dq = l.dk = pdq.s;
  fsattn_dims dims = c.dims();
  dims.layout = &l;
  const fsattn_status st =
      fsattn_bla_backward(&kCpu, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), nullptr, nullptr, u.d_o.ptr(), nullptr,
                          nullptr, dqk.data(), dqk.data() + 1, dv.data(), dlg.data(), nullptr, nullptr);
  expect_refused(st, FSATTN_ERROR_INVALID_ARGUMENT, dqk, "dq shares memory with dk");
  // A layout struct of no known size.
  l = FSATTN_LAYOUT_INIT;
  l.struct_size = 8;
  expect_refused(forward(l, c.q.ptr(), o.data()), FSATTN_ERROR_INVALID_ARGUMENT, o, "dims->layout->struct_size");
}

// A call that fails after it started fills its strided outputs with NaN, element by element,
// and leaves the memory between them alone.
TEST(Layout, FailedCallsFillOnlyTheElements) {
  const IdaCase c = make_ida_case({1, 200, 2, 16, 16, 8}, 70, false);
  const auto &s = c.s;
  const fsattn_ida_params p = c.params();
  const Placement po = head_major(s.B, s.T, s.H, s.Dv, 7);
  std::vector<float> o = scatter({{po, nullptr}});
  std::fill(o.begin(), o.end(), kGap);
  fsattn_layout l = FSATTN_LAYOUT_INIT;
  l.o = po.s;
  fsattn_dims dims = c.dims();
  dims.layout = &l;
  fsattn_set_workspace_limit(64 << 10);
  const fsattn_status st = fsattn_ida_forward(&kCpu, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), nullptr, nullptr,
                                              o.data(), nullptr, nullptr);
  fsattn_set_workspace_limit(0);
  ASSERT_EQ(st, FSATTN_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(gaps_written(o, {po}), 0u);
  for (float e : gather(o, po)) ASSERT_TRUE(std::isnan(e));
}

}  // namespace
