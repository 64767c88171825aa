// The BLA backward pass (docs/spec.md §2 "Backward"), a hand-written adjoint of bla_forward:
//   recompute the forward (key and value scans, z, π) -> dπ_t = Vs_t d_o_t -> dz (softmax
//   adjoint) -> dq_t = Ks_t^T dz_t; two reverse scans for the state adjoints
//   ∂L/∂Ks_t = dz_t ⊗ q_t + γ ∂L/∂Ks_{t+1} and ∂L/∂Vs_t = π_t ⊗ d_o_t + γ ∂L/∂Vs_{t+1},
//   read by φ_t for dk and dv; d log γ from per-token and per-chunk contractions.
// Only chunk-boundary states are stored (forward and adjoint), never per-token states.
#pragma once

#include "bla_forward.h"

namespace fsattn {

struct BlaBackwardInputs {
  BlaForwardInputs forward;                   // the forward's inputs
  Halide::Func d_o;                           // (r, h, t, b)
  Halide::Func d_state_k_out, d_state_v_out;  // (r, m, h, b): gradients of the final states
};

struct BlaBackwardStages {
  BlaForwardStages fwd;                 // the forward, recomputed (its o and final states are not used)
  Halide::Func pi_z;                    // (m, i, c, h, b): (π, z), stored
  CxFunc pi;                            // (m, i, c, h, b): π, read from pi_z
  Halide::Func d_o;                     // chunked (r, i, c, h, b)
  ChannelRead dpi;                      // dπ_t[m] = Vs_t[m] · d_o_t
  Halide::Func delta;                   // (i, c, h, b) = Σ_m π dπ (= d_o · o)
  Halide::Func dz_term;                 // (m, i, c, h, b): (dz, (i + 1)(π dπ + dz z)), stored; see d log γ below
  CxFunc dz;                            // (m, i, c, h, b) = ∂L/∂z = scale π (dπ − δ); zero past the last token
  SlotRead dq_read;                     // dq_t = Σ_m dz_t[m] Ks_t[m]
  ScanInputs key_adj_in, value_adj_in;  // reverse scans written with dz ⊗ q and π ⊗ d_o
  ScanStages key_adj, value_adj;        // state(c): ∂L/∂(state after chunk c − 1)
  SlotRead dk_read, dv_read;            // dk_t = Σ_m φ_t[m] ∂L/∂Ks_t[m], and dv_t likewise
  Halide::Func dq, dk, dv;              // (r, h, t, b)
  // d log γ = Σ over the decay steps of <∂L/∂X_t, γ X_{t-1}>, for both scans. Within a chunk
  // that sum equals Σ_i (i + 1)(<P_i, X_i> − <W_i, A_i>) + len <R, X_end>, where P_i is token
  // i's adjoint write, W_i its forward write, A_i/X_i the adjoint and forward states at i and
  // R the adjoint entering the chunk: <P_i, X_i> is Σ_m π dπ (values) and dz · z (keys),
  // <W_i, A_i> is v · dv and k · dk. So no per-token state is needed. The sums, in double:
  Halide::Func slot_terms;                  // (m, h, b): Σ_tokens dz_term[1]
  Halide::Func k_terms, v_terms;            // (r, h, b): Σ_tokens (i + 1) k[r] dk[r], and v dv
  Halide::Func k_end_terms, v_end_terms;    // (r, h, b): Σ_chunks len Σ_m R[m, r] X_end[m, r]
  Halide::Func d_log_gamma;                 // (h, b): this batch element's share
  Halide::Func d_state_k_in, d_state_v_in;  // (r, m, h, b)
  Halide::RDom r_delta, r_tokens, r_chunks, r_slots, r_dk, r_dv;
};

// masking: see Masking (grid.h).
BlaBackwardStages bla_backward_algorithm(const BlaBackwardInputs &in, int chunk, Masking masking = Masking::none);

}  // namespace fsattn
