// Float64 reference of IDA (SPEC.md §1), token by token, written straight from the spec.
// Layouts are the API's: [B,T,H,D] activations, complex as trailing (re, im).
#pragma once

#include <cstdint>
#include <vector>

namespace fsattn::ref {

struct IdaShape {
  int64_t B, T, H, Dk, Dv, M;
};

struct IdaParams {
  std::vector<double> gk, bk, gv, bv;  // [H,Dk] [H,Dk] [H,Dv] [H,Dv]
  std::vector<double> log_dt;          // [H]
  std::vector<double> A_re_log, A_im;  // [H,M]
  std::vector<double> B;               // [H,M,2]
  std::vector<double> C;               // [H,M,M,2]
  double eps = 1e-6;
};

struct IdaOutputs {
  std::vector<double> o;                 // [B,T,H,Dv]
  std::vector<double> state_k, state_v;  // [B,H,M,Dk,2] [B,H,M,Dv,2]
};

// state_k_in / state_v_in may be empty (zero initial state).
IdaOutputs ida_forward(const IdaShape &s, const IdaParams &p, const std::vector<double> &q,
                       const std::vector<double> &k, const std::vector<double> &v,
                       const std::vector<double> &state_k_in, const std::vector<double> &state_v_in);

}  // namespace fsattn::ref
