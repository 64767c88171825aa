// Float64 reference of IDA (docs/spec.md §1), token by token, written straight from the spec.
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

// Gradients of L = <d_o, o> + <d_state_k, Xk_T> + <d_state_v, Xv_T> (docs/spec.md §1 "Backward"),
// derived by hand (reverse recurrence over the stored per-token states). A complex value's
// gradient is (∂L/∂re, ∂L/∂im). Empty d_state_* are zero; the state gradients are those of
// the initial states.
struct IdaGrads {
  std::vector<double> q, k, v;                 // [B,T,H,Dk] [B,T,H,Dk] [B,T,H,Dv]
  std::vector<double> gk, bk, gv, bv, log_dt;  // as the parameters
  std::vector<double> A_re_log, A_im, B, C;
  std::vector<double> state_k, state_v;  // [B,H,M,Dk,2] [B,H,M,Dv,2]
};
IdaGrads ida_backward(const IdaShape &s, const IdaParams &p, const std::vector<double> &q, const std::vector<double> &k,
                      const std::vector<double> &v, const std::vector<double> &state_k_in,
                      const std::vector<double> &state_v_in, const std::vector<double> &d_o,
                      const std::vector<double> &d_state_k, const std::vector<double> &d_state_v);

// state_k_in / state_v_in may be empty (zero initial state).
IdaOutputs ida_forward(const IdaShape &s, const IdaParams &p, const std::vector<double> &q,
                       const std::vector<double> &k, const std::vector<double> &v,
                       const std::vector<double> &state_k_in, const std::vector<double> &state_v_in);

}  // namespace fsattn::ref
