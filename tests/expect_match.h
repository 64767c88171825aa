// GoogleTest checks shared by the kernel suites.
#pragma once

#include "cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include <string>
#include <tuple>

namespace fsattn::test {

// A kernel's result (status, o, final states) against float64 or float32 values, within tol
// (relative Frobenius, docs/spec.md §4).
template <typename Result, typename Want>
void expect_match(const Result &r, const Want &want, double tol, const std::string &what = "") {
  ASSERT_EQ(r.status, FSATTN_OK) << what << ": " << fsattn_last_error();
  EXPECT_LE(rel_error(r.o, want.o), tol) << what << ": o";
  EXPECT_LE(rel_error(r.state_k, want.state_k), tol) << what << ": state_k";
  EXPECT_LE(rel_error(r.state_v, want.state_v), tol) << what << ": state_v";
}

// The relative error of a gradient, except where the reference gradient is zero: some are
// exactly zero in exact arithmetic, and float32 leaves rounding noise there. (BLA with M = 0
// and no initial state keeps every slot equal, so the softmax is flat and q and k get no
// gradient: about 2e-9 RMS of noise. With T = 1 and no initial state γ never multiplies
// anything, so d log γ is 0, as a sum of O(1) terms that cancel: about 2e-7 of noise.)
// Below an RMS of `floor` the error is measured against that RMS instead; the tests' inputs
// are O(1), their nonzero activation gradients have RMS 1e-2 and more, and d log γ, a sum
// over tokens, 1e-1 and more.
inline double grad_error(const std::vector<float> &a, const std::vector<double> &b, double floor = 1e-4) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / std::max(den, floor * floor * double(b.size())));
}
inline double grad_error(const std::vector<float> &a, const std::vector<float> &b, double floor = 1e-4) {
  return grad_error(a, std::vector<double>(b.begin(), b.end()), floor);
}

// Every gradient of a backward call against another (float64 reference or float32 run).
template <typename Result, typename Want>
void expect_grads_match(const Result &r, const Want &want, double tol, const std::string &what = "") {
  ASSERT_EQ(r.status, FSATTN_OK) << what << ": " << fsattn_last_error();
  EXPECT_LE(grad_error(r.q, want.q), tol) << what << ": dq";
  EXPECT_LE(grad_error(r.k, want.k), tol) << what << ": dk";
  EXPECT_LE(grad_error(r.v, want.v), tol) << what << ": dv";
  EXPECT_LE(grad_error(r.log_gamma, want.log_gamma, 1e-2), tol) << what << ": d_log_gamma";
  EXPECT_LE(grad_error(r.state_k, want.state_k), tol) << what << ": d_state_k";
  EXPECT_LE(grad_error(r.state_v, want.state_v), tol) << what << ": d_state_v";
}

// Every gradient of an IDA backward call against another.
template <typename Result, typename Want>
void expect_ida_grads_match(const Result &r, const Want &want, double tol, const std::string &what = "") {
  ASSERT_EQ(r.status, FSATTN_OK) << what << ": " << fsattn_last_error();
  EXPECT_LE(grad_error(r.q, want.q), tol) << what << ": dq";
  EXPECT_LE(grad_error(r.k, want.k), tol) << what << ": dk";
  EXPECT_LE(grad_error(r.v, want.v), tol) << what << ": dv";
  EXPECT_LE(grad_error(r.state_k, want.state_k), tol) << what << ": d_state_k";
  EXPECT_LE(grad_error(r.state_v, want.state_v), tol) << what << ": d_state_v";
  // Parameter gradients sum over every token: their scale is that of d log γ (above).
  for (auto [got, ref, name] :
       {std::tuple(&r.gk, &want.gk, "gk"), std::tuple(&r.bk, &want.bk, "bk"), std::tuple(&r.gv, &want.gv, "gv"),
        std::tuple(&r.bv, &want.bv, "bv"), std::tuple(&r.log_dt, &want.log_dt, "log_dt"),
        std::tuple(&r.A_re_log, &want.A_re_log, "A_re_log"), std::tuple(&r.A_im, &want.A_im, "A_im"),
        std::tuple(&r.B, &want.B, "B"), std::tuple(&r.C, &want.C, "C")}) {
    EXPECT_LE(grad_error(*got, *ref, 1e-2), tol) << what << ": d" << name;
  }
}

// Test names for the (shape, variant, with_state) parameters of the reference suites.
struct ShapeVariantStateName {
  template <typename Info>
  std::string operator()(const Info &info) const {
    return std::string(std::get<0>(info.param).what) + "_" + std::get<1>(info.param) +
           (std::get<2>(info.param) ? "_state" : "_zero_state");
  }
};

}  // namespace fsattn::test
