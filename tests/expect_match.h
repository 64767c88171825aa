// GoogleTest checks shared by the kernel suites.
#pragma once

#include "test_util.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>

namespace fsattn::test {

// A kernel's result (status, o, final states) against float64 or float32 values, within tol
// (relative Frobenius, SPEC.md §4).
template <typename Result, typename Want>
void expect_match(const Result &r, const Want &want, double tol, const std::string &what = "") {
  ASSERT_EQ(r.status, FSATTN_OK) << what << ": " << fsattn_last_error();
  EXPECT_LE(rel_error(r.o, want.o), tol) << what << ": o";
  EXPECT_LE(rel_error(r.state_k, want.state_k), tol) << what << ": state_k";
  EXPECT_LE(rel_error(r.state_v, want.state_v), tol) << what << ": state_v";
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
