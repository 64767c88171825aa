// Variable-length batches (dims->cu_seqlens) on the CPU: a varlen call equals separate calls
// per sequence, forward and backward, with empty and one-token sequences, and each sequence
// matches the float64 reference; invalid cu_seqlens are refused with a message.
#include "expect_match.h"

#include <gtest/gtest.h>

using namespace fsattn;
using namespace fsattn::test;

namespace {

// Lengths 5, 0, 1, 34, 0, 40: empty and one-token sequences, and lengths across a chunk.
const std::vector<int64_t> kCu = {0, 5, 5, 6, 40, 40, 80};
constexpr int64_t kSeqs = 6, kT = 80;

// Tokens [t0, t1) of a [1,T,H,D] tensor.
Tensor32 tokens(const Tensor32 &x, int64_t H, int64_t D, int64_t t0, int64_t t1) {
  return slice_tokens(x, 1, kT, H, D, t0, t1);
}
// Entry s of a tensor of `n` floats per sequence.
Tensor32 entry(const Tensor32 &x, int64_t s, size_t n) {
  Tensor32 y;
  if (!x.f.empty()) y.set(std::vector<float>(x.f.begin() + s * n, x.f.begin() + (s + 1) * n));
  return y;
}
std::vector<float> concat(const std::vector<std::vector<float>> &parts) {
  std::vector<float> y;
  for (const auto &p : parts) y.insert(y.end(), p.begin(), p.end());
  return y;
}

TEST(Varlen, BlaEqualsSeparateCalls) {
  // A batch of kSeqs states over one sequence of kT tokens.
  const ref::BlaShape shape{kSeqs, kT, 2, 8, 6, 4, 13.5, 9};
  BlaCase all = make_bla_case(shape, 100, 61, 0.9, true);
  BlaCase c = all;  // the varlen call: batch 1, tokens of all sequences, kSeqs states
  c.s.B = 1;
  c.q = tokens(all.q, 2, 8, 0, kT), c.k = tokens(all.k, 2, 8, 0, kT), c.v = tokens(all.v, 2, 6, 0, kT);
  BlaUpstream u = make_bla_upstream(all, 62, true);
  u.d_o = tokens(u.d_o, 2, 6, 0, kT);
  const size_t nk = 2 * 9 * 8, nv = 2 * 9 * 6;
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  fsattn_dims dims{sizeof(fsattn_dims), 1, kT, 2, 8, 6, kCu.data(), kSeqs};
  fsattn_bla_params p = c.params();
  std::vector<float> o(kT * 2 * 6, NAN), sk(kSeqs * nk, NAN), sv(kSeqs * nv, NAN);
  ASSERT_EQ(FSATTN_OK, fsattn_bla_forward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), c.state_k.ptr(),
                                          c.state_v.ptr(), o.data(), sk.data(), sv.data()))
      << fsattn_last_error();
  BlaGradResult g;
  g.q.assign(kT * 2 * 8, NAN), g.k = g.q, g.v.assign(kT * 2 * 6, NAN), g.log_gamma.assign(2, NAN);
  g.state_k.assign(kSeqs * nk, NAN), g.state_v.assign(kSeqs * nv, NAN);
  ASSERT_EQ(FSATTN_OK,
            fsattn_bla_backward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), c.state_k.ptr(), c.state_v.ptr(),
                                u.d_o.ptr(), u.d_state_k.ptr(), u.d_state_v.ptr(), g.q.data(), g.k.data(), g.v.data(),
                                g.log_gamma.data(), g.state_k.data(), g.state_v.data()))
      << fsattn_last_error();

  std::vector<std::vector<float>> o_parts, dq, dk, dv;
  std::vector<double> dlg(2, 0.0);
  for (int64_t s = 0; s < kSeqs; ++s) {
    const int64_t t0 = kCu[s], t1 = kCu[s + 1];
    BlaCase one = c;
    one.s.B = 1, one.s.T = t1 - t0;
    one.state_k = entry(c.state_k, s, nk), one.state_v = entry(c.state_v, s, nv);
    const size_t ks = s * nk, vs = s * nv;
    if (t1 == t0) {  // an empty sequence passes its states (and their gradients) through
      EXPECT_EQ(std::vector<float>(sk.begin() + ks, sk.begin() + ks + nk), one.state_k.f);
      EXPECT_EQ(std::vector<float>(g.state_v.begin() + vs, g.state_v.begin() + vs + nv), entry(u.d_state_v, s, nv).f);
      continue;
    }
    one.q = tokens(c.q, 2, 8, t0, t1), one.k = tokens(c.k, 2, 8, t0, t1), one.v = tokens(c.v, 2, 6, t0, t1);
    BlaUpstream up{tokens(u.d_o, 2, 6, t0, t1), entry(u.d_state_k, s, nk), entry(u.d_state_v, s, nv)};
    const BlaResult r = run_bla_forward(one);
    const BlaGradResult rg = run_bla_backward(one, up);
    ASSERT_EQ(r.status, FSATTN_OK) << fsattn_last_error();
    ASSERT_EQ(rg.status, FSATTN_OK) << fsattn_last_error();
    o_parts.push_back(r.o), dq.push_back(rg.q), dk.push_back(rg.k), dv.push_back(rg.v);
    EXPECT_EQ(std::vector<float>(sk.begin() + ks, sk.begin() + ks + nk), r.state_k) << s;
    EXPECT_EQ(std::vector<float>(sv.begin() + vs, sv.begin() + vs + nv), r.state_v) << s;
    EXPECT_EQ(std::vector<float>(g.state_k.begin() + ks, g.state_k.begin() + ks + nk), rg.state_k) << s;
    for (int h = 0; h < 2; ++h) dlg[h] += rg.log_gamma[h];
    // And against the float64 reference.
    expect_match(r, reference_bla_forward(one), 1e-5, "sequence " + std::to_string(s));
    expect_grads_match(rg, reference_bla_backward(one, up), 1e-4, "sequence " + std::to_string(s));
  }
  EXPECT_EQ(o, concat(o_parts));
  EXPECT_EQ(g.q, concat(dq));
  EXPECT_EQ(g.k, concat(dk));
  EXPECT_EQ(g.v, concat(dv));
  EXPECT_LE(grad_error(g.log_gamma, dlg, 1e-2), 1e-6);
}

TEST(Varlen, IdaEqualsSeparateCalls) {
  const ref::IdaShape shape{kSeqs, kT, 2, 8, 6, 5};
  IdaCase all = make_ida_case(shape, 71, true);
  IdaCase c = all;
  c.s.B = 1;
  c.q = tokens(all.q, 2, 8, 0, kT), c.k = tokens(all.k, 2, 8, 0, kT), c.v = tokens(all.v, 2, 6, 0, kT);
  IdaUpstream u = make_ida_upstream(all, 72, true);
  u.d_o = tokens(u.d_o, 2, 6, 0, kT);
  const size_t nk = 2 * 2 * 5 * 8, nv = 2 * 2 * 5 * 6;
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  fsattn_dims dims{sizeof(fsattn_dims), 1, kT, 2, 8, 6, kCu.data(), kSeqs};
  fsattn_ida_params p = c.params();
  std::vector<float> o(kT * 2 * 6, NAN), sk(kSeqs * nk, NAN), sv(kSeqs * nv, NAN);
  ASSERT_EQ(FSATTN_OK, fsattn_ida_forward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), c.state_k.ptr(),
                                          c.state_v.ptr(), o.data(), sk.data(), sv.data()))
      << fsattn_last_error();
  IdaCase one_token = c;                             // for run_ida_backward's buffer sizes: replaced below
  IdaGradResult g = run_ida_backward(one_token, u);  // dense sizes match the varlen call's activations
  fsattn_ida_grads dp = g.params();
  g.state_k.assign(kSeqs * nk, NAN), g.state_v.assign(kSeqs * nv, NAN);
  ASSERT_EQ(FSATTN_OK, fsattn_ida_backward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(), c.state_k.ptr(),
                                           c.state_v.ptr(), u.d_o.ptr(), u.d_state_k.ptr(), u.d_state_v.ptr(),
                                           g.q.data(), g.k.data(), g.v.data(), &dp, g.state_k.data(), g.state_v.data()))
      << fsattn_last_error();

  std::vector<std::vector<float>> o_parts, dq;
  std::vector<double> dC(g.C.size(), 0.0), dlog_dt(2, 0.0);
  for (int64_t s = 0; s < kSeqs; ++s) {
    const int64_t t0 = kCu[s], t1 = kCu[s + 1];
    if (t1 == t0) continue;
    IdaCase one = c;
    one.s.T = t1 - t0;
    one.state_k = entry(c.state_k, s, nk), one.state_v = entry(c.state_v, s, nv);
    one.q = tokens(c.q, 2, 8, t0, t1), one.k = tokens(c.k, 2, 8, t0, t1), one.v = tokens(c.v, 2, 6, t0, t1);
    IdaUpstream up{tokens(u.d_o, 2, 6, t0, t1), entry(u.d_state_k, s, nk), entry(u.d_state_v, s, nv)};
    const IdaResult r = run_ida_forward(one);
    const IdaGradResult rg = run_ida_backward(one, up);
    ASSERT_EQ(r.status, FSATTN_OK) << fsattn_last_error();
    ASSERT_EQ(rg.status, FSATTN_OK) << fsattn_last_error();
    o_parts.push_back(r.o), dq.push_back(rg.q);
    EXPECT_EQ(std::vector<float>(sk.begin() + s * nk, sk.begin() + (s + 1) * nk), r.state_k) << s;
    EXPECT_EQ(std::vector<float>(g.state_v.begin() + s * nv, g.state_v.begin() + (s + 1) * nv), rg.state_v) << s;
    for (size_t i = 0; i < dC.size(); ++i) dC[i] += rg.C[i];
    for (int h = 0; h < 2; ++h) dlog_dt[h] += rg.log_dt[h];
    expect_match(r, reference_ida_forward(one), 1e-5, "sequence " + std::to_string(s));
    expect_ida_grads_match(rg, reference_ida_backward(one, up), 1e-4, "sequence " + std::to_string(s));
  }
  EXPECT_EQ(o, concat(o_parts));
  EXPECT_EQ(g.q, concat(dq));
  EXPECT_LE(grad_error(g.C, dC), 1e-6);
  EXPECT_LE(grad_error(g.log_dt, dlog_dt, 1e-2), 1e-6);
}

TEST(Varlen, InvalidCuSeqlensAreRefused) {
  const BlaCase c = make_bla_case({1, 10, 1, 4, 4, 2, 8.0, 5}, 0, 1, 0.9, false);
  fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  fsattn_bla_params p = c.params();
  std::vector<float> o(40, 7.0f);
  struct Bad {
    const char *what;
    std::vector<int64_t> cu;
    int64_t batch;
    const char *message;
  };
  const Bad cases[] = {
      {"not starting at 0", {1, 4, 10}, 1, "cu_seqlens[0]"},
      {"decreasing", {0, 6, 4, 10}, 1, "must not decrease"},
      {"not ending at seqlen", {0, 4, 9}, 1, "must equal dims->seqlen"},
      {"batch 2", {0, 4, 10}, 2, "batch"},
  };
  for (const Bad &bad : cases) {
    fsattn_dims dims{sizeof(fsattn_dims), bad.batch, 10, 1, 4, 4, bad.cu.data(), int64_t(bad.cu.size()) - 1};
    EXPECT_EQ(FSATTN_ERROR_INVALID_ARGUMENT, fsattn_bla_forward(&exec, &dims, &p, c.q.ptr(), c.k.ptr(), c.v.ptr(),
                                                                nullptr, nullptr, o.data(), nullptr, nullptr))
        << bad.what;
    EXPECT_NE(std::string(fsattn_last_error()).find(bad.message), std::string::npos) << fsattn_last_error();
  }
  EXPECT_EQ(o, std::vector<float>(40, 7.0f));
}

// A variable-length call that one of its sequences' calls would refuse (here an unknown
// variant, which is found per sequence) is refused before any sequence runs: every output and
// final state keeps the caller's values, also after an empty first sequence, whose states
// are otherwise copied through first. (Before, the sequences ran in turn and a refusal filled
// the outputs with NaN.)
TEST(Varlen, RefusedCallsWriteNothing) {
  const std::vector<int64_t> cu = {0, 0, 4, 10};  // lengths 0, 4, 6
  const int64_t T = 10, H = 2, D = 4, S = 3, M = 3, seqs = 3;
  const BlaCase bc = make_bla_case({1, T, H, D, D, 1, 8.0, S}, 0, 1, 0.9, false);
  const IdaCase ic = make_ida_case({1, T, H, D, D, M}, 2, false);
  fsattn_exec exec = FSATTN_EXEC_INIT;
  exec.variant = "no_such_variant";
  fsattn_dims dims = bc.dims();
  dims.cu_seqlens = cu.data(), dims.num_seqs = seqs;
  const fsattn_bla_params bp = bc.params();
  const fsattn_ida_params ip = ic.params();
  const size_t n_tok = T * H * D, n_bla = seqs * H * S * D, n_ida = seqs * H * M * D * 2;
  const std::vector<float> bla_in(n_bla, 0.5f), ida_in(n_ida, 0.5f), d_o(n_tok, 1.0f);
  auto buffer = [](size_t n) { return std::vector<float>(n, -3.0f); };
  std::vector<float> o = buffer(n_tok), dq = buffer(n_tok), dk = buffer(n_tok), dv = buffer(n_tok), dlg = buffer(H);
  std::vector<float> bsk = buffer(n_bla), bsv = buffer(n_bla), isk = buffer(n_ida), isv = buffer(n_ida);
  std::vector<float> ig[9];
  fsattn_ida_grads dp = FSATTN_IDA_GRADS_INIT;
  float **members[9] = {&dp.gk, &dp.bk, &dp.gv, &dp.bv, &dp.log_dt, &dp.A_re_log, &dp.A_im, &dp.B, &dp.C};
  for (int i = 0; i < 9; ++i) ig[i] = buffer(2 * H * M * M * D), *members[i] = ig[i].data();
  auto expect_untouched = [&](fsattn_status st, const char *fn) {
    EXPECT_EQ(st, FSATTN_ERROR_INVALID_ARGUMENT) << fn;
    EXPECT_NE(std::string(fsattn_last_error()).find("no_such_variant"), std::string::npos) << fsattn_last_error();
    for (const std::vector<float> *b : {&o, &dq, &dk, &dv, &dlg, &bsk, &bsv, &isk, &isv, &ig[0], &ig[8]}) {
      EXPECT_EQ(*b, buffer(b->size())) << fn;
    }
  };
  expect_untouched(fsattn_bla_forward(&exec, &dims, &bp, bc.q.ptr(), bc.k.ptr(), bc.v.ptr(), bla_in.data(),
                                      bla_in.data(), o.data(), bsk.data(), bsv.data()),
                   "fsattn_bla_forward");
  expect_untouched(fsattn_bla_backward(&exec, &dims, &bp, bc.q.ptr(), bc.k.ptr(), bc.v.ptr(), bla_in.data(),
                                       bla_in.data(), d_o.data(), bla_in.data(), bla_in.data(), dq.data(), dk.data(),
                                       dv.data(), dlg.data(), bsk.data(), bsv.data()),
                   "fsattn_bla_backward");
  expect_untouched(fsattn_ida_forward(&exec, &dims, &ip, ic.q.ptr(), ic.k.ptr(), ic.v.ptr(), ida_in.data(),
                                      ida_in.data(), o.data(), isk.data(), isv.data()),
                   "fsattn_ida_forward");
  expect_untouched(fsattn_ida_backward(&exec, &dims, &ip, ic.q.ptr(), ic.k.ptr(), ic.v.ptr(), ida_in.data(),
                                       ida_in.data(), d_o.data(), ida_in.data(), ida_in.data(), dq.data(), dk.data(),
                                       dv.data(), &dp, isk.data(), isv.data()),
                   "fsattn_ida_backward");
}

}  // namespace
