// Float64 reference of BLA (SPEC.md §2), token by token, written straight from the spec.
// Layouts are the API's: [B,T,H,D] activations, states [B,H,S,D].
#pragma once

#include <cstdint>
#include <vector>

namespace fsattn::ref {

struct BlaShape {
  int64_t B, T, H, Dk, Dv;
  int64_t M;  // Fourier modes (>= 0)
  double W;   // period, > 0, any real
  int64_t S;  // slots (>= 1)
};

struct BlaParams {
  std::vector<double> log_gamma;  // [H]
  double scale;                   // already resolved: the caller passes Dk^-1/2 when the API's scale <= 0
  int64_t pos0;                   // absolute position of the first token
};

struct BlaOutputs {
  std::vector<double> o;                 // [B,T,H,Dv]
  std::vector<double> state_k, state_v;  // [B,H,S,Dk] [B,H,S,Dv]
};

// φ_t[j] = D_M(a_j − t) / W with a_j = j·W/S, evaluated from t mod W reduced in double.
double dirichlet_weight(int64_t M, double W, int64_t S, int64_t j, int64_t t);

// state_k_in / state_v_in may be empty (zero initial state).
BlaOutputs bla_forward(const BlaShape &s, const BlaParams &p, const std::vector<double> &q,
                       const std::vector<double> &k, const std::vector<double> &v,
                       const std::vector<double> &state_k_in, const std::vector<double> &state_v_in);

}  // namespace fsattn::ref
