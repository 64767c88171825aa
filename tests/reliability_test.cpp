// Reliability of the CPU API inside someone else's process: concurrent callers, non-finite
// inputs, and running out of memory.
#include "cases.h"
#include "poison.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>

using namespace fsattn;
using namespace fsattn::test;

namespace {

// Many threads calling both forward passes at once, each on its own data, get exactly the
// results of one thread calling alone; likewise the backward passes.
TEST(Reliability, ManyThreadsMatchOneThread) {
  constexpr int kThreads = 8;
  std::vector<IdaCase> ida;
  std::vector<BlaCase> bla;
  std::vector<IdaResult> ida_alone;
  std::vector<BlaResult> bla_alone;
  for (int t = 0; t < kThreads; ++t) {
    ida.push_back(make_ida_case({1 + t % 2, 70 + 13 * t, 1 + t % 3, 8 + t, 5 + t, 3 + t}, 500 + t, t % 2 == 0));
    bla.push_back(make_bla_case({1 + t % 2, 90 + 7 * t, 1 + t % 3, 4 + t, 9 - t, t, 10.5 + t, 2 * t + 1}, 1000 * t,
                                600 + t, 0.9, t % 2 == 1));
    ida_alone.push_back(run_ida_forward(ida.back()));
    bla_alone.push_back(run_bla_forward(bla.back()));
    ASSERT_EQ(ida_alone.back().status, FSATTN_OK) << fsattn_last_error();
    ASSERT_EQ(bla_alone.back().status, FSATTN_OK) << fsattn_last_error();
  }
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep) {
        IdaResult a = run_ida_forward(ida[t]);
        BlaResult b = run_bla_forward(bla[t]);
        mismatches[t] += a.status != FSATTN_OK || a.o != ida_alone[t].o || a.state_k != ida_alone[t].state_k ||
                         a.state_v != ida_alone[t].state_v;
        mismatches[t] += b.status != FSATTN_OK || b.o != bla_alone[t].o || b.state_k != bla_alone[t].state_k ||
                         b.state_v != bla_alone[t].state_v;
      }
    });
  }
  for (std::thread &th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST(Reliability, ManyThreadsMatchOneThreadBackward) {
  constexpr int kThreads = 8;
  std::vector<IdaCase> ida;
  std::vector<BlaCase> bla;
  std::vector<IdaUpstream> ida_up;
  std::vector<BlaUpstream> bla_up;
  std::vector<IdaGradResult> ida_alone;
  std::vector<BlaGradResult> bla_alone;
  for (int t = 0; t < kThreads; ++t) {
    ida.push_back(make_ida_case({1 + t % 2, 70 + 13 * t, 1 + t % 3, 8 + t, 5 + t, 3 + t}, 900 + t, t % 2 == 0));
    bla.push_back(make_bla_case({1 + t % 2, 90 + 7 * t, 1 + t % 3, 4 + t, 9 - t, t, 10.5 + t, 2 * t + 1}, 1000 * t,
                                950 + t, 0.9, t % 2 == 1));
    ida_up.push_back(make_ida_upstream(ida.back(), 960 + t, t % 2 == 1));
    bla_up.push_back(make_bla_upstream(bla.back(), 970 + t, t % 2 == 0));
    ida_alone.push_back(run_ida_backward(ida.back(), ida_up.back()));
    bla_alone.push_back(run_bla_backward(bla.back(), bla_up.back()));
    ASSERT_EQ(ida_alone.back().status, FSATTN_OK) << fsattn_last_error();
    ASSERT_EQ(bla_alone.back().status, FSATTN_OK) << fsattn_last_error();
  }
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 3; ++rep) {
        const IdaGradResult a = run_ida_backward(ida[t], ida_up[t]);
        const BlaGradResult b = run_bla_backward(bla[t], bla_up[t]);
        const IdaGradResult &ia = ida_alone[t];
        const BlaGradResult &ba = bla_alone[t];
        mismatches[t] += a.status != FSATTN_OK || a.q != ia.q || a.k != ia.k || a.v != ia.v || a.C != ia.C ||
                         a.A_im != ia.A_im || a.gk != ia.gk || a.state_k != ia.state_k || a.state_v != ia.state_v;
        mismatches[t] += b.status != FSATTN_OK || b.q != ba.q || b.k != ba.k || b.v != ba.v ||
                         b.log_gamma != ba.log_gamma || b.state_k != ba.state_k || b.state_v != ba.state_v;
      }
    });
  }
  for (std::thread &th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

TEST(Reliability, NonFiniteInputsStayLocalIda) {
  check_poison(make_ida_case({2, 75, 2, 8, 6, 5}, 700, true), [](const IdaCase &c) { return run_ida_forward(c); });
}

TEST(Reliability, NonFiniteInputsStayLocalBla) {
  check_poison(make_bla_case({2, 75, 2, 8, 6, 4, 20.5, 9}, 3, 701, 0.9, true),
               [](const BlaCase &c) { return run_bla_forward(c); });
}

// Over a workspace budget a call fails with FSATTN_ERROR_OUT_OF_MEMORY and fills its outputs
// with NaN, except a state updated in place, which keeps its initial values; within the
// budget it succeeds again.
TEST(Reliability, OutOfMemoryPoisonsOutputsAndKeepsStates) {
  BlaCase c = make_bla_case({2, 300, 2, 16, 16, 7, 30.0, 15}, 0, 801, 0.9, true);
  const BlaResult want = run_bla_forward(c);
  ASSERT_EQ(want.status, FSATTN_OK) << fsattn_last_error();
  std::vector<float> sk = c.state_k.f, sv = c.state_v.f, o(want.o.size(), 1.0f);
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  fsattn_dims dims = c.dims();
  fsattn_bla_params p = c.params();
  fsattn_set_workspace_limit(64 << 10);
  fsattn_status st = fsattn_bla_forward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), sk.data(), sv.data(),
                                        o.data(), sk.data(), sv.data());
  fsattn_set_workspace_limit(0);
  ASSERT_EQ(st, FSATTN_ERROR_OUT_OF_MEMORY);
  EXPECT_NE(std::string(fsattn_last_error()).find("fsattn_bla_forward"), std::string::npos) << fsattn_last_error();
  for (float e : o) ASSERT_TRUE(std::isnan(e));
  EXPECT_EQ(sk, c.state_k.f);
  EXPECT_EQ(sv, c.state_v.f);

  IdaCase ic = make_ida_case({1, 200, 2, 16, 16, 8}, 802, true);
  std::vector<float> io(200 * 2 * 16, 1.0f), isk(1 * 2 * 8 * 16 * 2, 1.0f);
  fsattn_dims idims = ic.dims();
  fsattn_ida_params ip = ic.params();
  fsattn_set_workspace_limit(64 << 10);
  st = fsattn_ida_forward(&exec, &idims, &ip, ic.q.ptr(), ic.k.ptr(), ic.v.ptr(), nullptr, nullptr, io.data(),
                          isk.data(), nullptr);
  fsattn_set_workspace_limit(0);
  ASSERT_EQ(st, FSATTN_ERROR_OUT_OF_MEMORY);
  for (float e : io) ASSERT_TRUE(std::isnan(e));
  for (float e : isk) ASSERT_TRUE(std::isnan(e));

  const BlaResult again = run_bla_forward(c);
  ASSERT_EQ(again.status, FSATTN_OK) << fsattn_last_error();
  EXPECT_EQ(again.o, want.o);
}

// The backward passes likewise: every gradient NaN (the parameters' too), an initial-state
// gradient written over its final-state gradient restored.
TEST(Reliability, OutOfMemoryPoisonsGradients) {
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  BlaCase c = make_bla_case({2, 300, 2, 16, 16, 7, 30.0, 15}, 0, 803, 0.9, true);
  BlaUpstream u = make_bla_upstream(c, 804, true);
  BlaGradResult r = run_bla_backward(c, u);
  ASSERT_EQ(r.status, FSATTN_OK) << fsattn_last_error();
  std::vector<float> seed_k = u.d_state_k.f;
  fsattn_dims dims = c.dims();
  fsattn_bla_params p = c.params();
  fsattn_set_workspace_limit(64 << 10);
  fsattn_status st = fsattn_bla_backward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), c.state_k.ptr(),
                                         c.state_v.ptr(), u.d_o.ptr(), seed_k.data(), u.d_state_v.ptr(), r.q.data(),
                                         r.k.data(), r.v.data(), r.log_gamma.data(), seed_k.data(), r.state_v.data());
  fsattn_set_workspace_limit(0);
  ASSERT_EQ(st, FSATTN_ERROR_OUT_OF_MEMORY);
  EXPECT_NE(std::string(fsattn_last_error()).find("fsattn_bla_backward"), std::string::npos) << fsattn_last_error();
  for (const std::vector<float> *g : {&r.q, &r.k, &r.v, &r.log_gamma, &r.state_v}) {
    for (float e : *g) ASSERT_TRUE(std::isnan(e));
  }
  EXPECT_EQ(seed_k, u.d_state_k.f);

  IdaCase ic = make_ida_case({2, 200, 2, 16, 16, 8}, 805, true);
  IdaUpstream iu = make_ida_upstream(ic, 806, true);
  IdaGradResult ir = run_ida_backward(ic, iu);
  ASSERT_EQ(ir.status, FSATTN_OK) << fsattn_last_error();
  fsattn_dims idims = ic.dims();
  fsattn_ida_params ip = ic.params();
  fsattn_ida_grads dp = ir.params();
  fsattn_set_workspace_limit(64 << 10);
  st = fsattn_ida_backward(&exec, &idims, &ip, ic.q.ptr(), ic.k.ptr(), ic.v.ptr(), ic.state_k.ptr(), ic.state_v.ptr(),
                           iu.d_o.ptr(), iu.d_state_k.ptr(), iu.d_state_v.ptr(), ir.q.data(), ir.k.data(), ir.v.data(),
                           &dp, ir.state_k.data(), ir.state_v.data());
  fsattn_set_workspace_limit(0);
  ASSERT_EQ(st, FSATTN_ERROR_OUT_OF_MEMORY);
  for (const std::vector<float> *g : {&ir.q, &ir.k, &ir.v, &ir.gk, &ir.bk, &ir.gv, &ir.bv, &ir.log_dt, &ir.A_re_log,
                                      &ir.A_im, &ir.B, &ir.C, &ir.state_k, &ir.state_v}) {
    for (float e : *g) ASSERT_TRUE(std::isnan(e));
  }
}

}  // namespace
