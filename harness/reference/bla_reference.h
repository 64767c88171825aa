// Float64 reference of BLA (docs/spec.md §2), token by token, written straight from the spec.
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

// Gradients of L = <d_o, o> + <d_state_k, Ks_T> + <d_state_v, Vs_T> (docs/spec.md §2 "Backward"),
// derived by hand (reverse recurrence over the stored per-token states). Empty d_state_* are
// zero; the state gradients are those of the initial states.
struct BlaGrads {
  std::vector<double> q, k, v;           // [B,T,H,Dk] [B,T,H,Dk] [B,T,H,Dv]
  std::vector<double> log_gamma;         // [H]
  std::vector<double> state_k, state_v;  // [B,H,S,Dk] [B,H,S,Dv]
};
BlaGrads bla_backward(const BlaShape &s, const BlaParams &p, const std::vector<double> &q, const std::vector<double> &k,
                      const std::vector<double> &v, const std::vector<double> &state_k_in,
                      const std::vector<double> &state_v_in, const std::vector<double> &d_o,
                      const std::vector<double> &d_state_k, const std::vector<double> &d_state_v);

// D_M(x) = 1 + 2 Σ_{m=1..M} cos(2π m x / W), summed term by term.
double dirichlet(int64_t M, double W, double x);

// φ_t[j] = D_M(a_j − t) / W with a_j = j·W/S, evaluated from t mod W reduced in double.
double dirichlet_weight(int64_t M, double W, int64_t S, int64_t j, int64_t t);

// The blurry window read back from a slot state (the API's fsattn_bla_interpolate):
// out[b,h,n,:] = (1/S) Σ_j D_M(a_j − (position − lags[n])) state[b,h,j,:], position reduced
// mod W first. state [B,H,S,D], out [B,H,N,D].
std::vector<double> bla_interpolate(int64_t B, int64_t H, int64_t D, int64_t M, double W, int64_t S, int64_t position,
                                    const std::vector<double> &lags, const std::vector<double> &state);

// Two other forms of BLA from docs/spec.md §2, for property tests:
// the exact window (W = S = 2M+1, γ = 1, T ≤ W, zero initial state) is causal softmax attention
// over the tokens plus S − t − 1 empty slots; returns o [B,T,H,Dv].
std::vector<double> exact_window_attention(const BlaShape &s, double scale, const std::vector<double> &q,
                                           const std::vector<double> &k, const std::vector<double> &v);
// The slot state through the Fourier coefficients F_t[m] = γ F_{t−1}[m] + e^{−iω_m t} x_t:
// Ks[j] = (1/W) Re Σ_m e^{iω_m a_j} F[m] after all T tokens of x [B,T,H,D] (zero initial
// state); returns [B,H,S,D].
std::vector<double> fourier_slot_state(const BlaShape &s, int64_t D, const std::vector<double> &log_gamma, int64_t pos0,
                                       const std::vector<double> &x);

// state_k_in / state_v_in may be empty (zero initial state).
BlaOutputs bla_forward(const BlaShape &s, const BlaParams &p, const std::vector<double> &q,
                       const std::vector<double> &k, const std::vector<double> &v,
                       const std::vector<double> &state_k_in, const std::vector<double> &state_v_in);

}  // namespace fsattn::ref
