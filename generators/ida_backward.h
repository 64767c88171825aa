// The IDA backward pass (docs/spec.md §1 "Backward"), a hand-written adjoint of ida_forward.
// A complex value's gradient is g = ∂L/∂re + i ∂L/∂im (so through z = a y, g_y = conj(a) g_z):
//   recompute the forward (features, both scans, p, w) ->
//   g_w = conj(Σ_c Xv_t d_o_t) (a read of the value state) -> g_p = conj(G conj(g_w)) ->
//   ∂L/∂fq = Re Σ_m conj(g_p) Xk_t; two reverse scans (decay conj Λ) for the state adjoints
//   Ak_t = g_p ⊗ fq_t + conj(Λ) Ak_{t+1} and Av_t = conj(w_t) ⊗ d_o_t + conj(Λ) Av_{t+1},
//   read by conj(B) for ∂L/∂kt, ∂L/∂vt, and by kt, vt for the gradients of B and Λ ->
//   the feature maps' adjoints. Only chunk-boundary states are stored, never per-token ones.
#pragma once

#include "ida_forward.h"

namespace fsattn {

struct IdaBackwardInputs {
  IdaForwardInputs forward;                   // the forward's inputs
  Halide::Func d_o;                           // (r, h, t, b)
  Halide::Func d_state_k_out, d_state_v_out;  // (ri, r, m, h, b): gradients of the final states
};

struct IdaBackwardStages {
  IdaForwardStages fwd;  // the forward, recomputed (its o and final states are not used)
  Halide::Func d_o;      // chunked (r, i, c, h, b)
  ChannelRead gw_read;   // (m, i, c, h, b): Σ_c Xv_t[m, c] d_o_t[c] = conj(g_w)
  CxFunc w2;             // G gw_read = conj(g_p)
  Halide::RDom r_w2;
  CxFunc gp, w_conj;  // g_p and conj(w): the adjoint scans' write weights
  CxFunc conj_decay;  // (n, m, h) = conj(Λ_m)^n
  CxFunc conj_b;      // (m, i, c, h, b) = conj(B_m), the adjoints' read weight
  SlotRead dfq_read;  // (r, i, c, h, b): ∂L/∂fq = Re Σ_m w2 Xk
  ScanInputs key_adj_in, value_adj_in;
  ScanStages key_adj, value_adj;  // state(c): ∂L/∂(state after chunk c − 1)
  SlotRead dkt_read, dvt_read;    // ∂L/∂kt = Re Σ_m conj(B) Ak, ∂L/∂vt likewise
  ChannelRead hk_read, hv_read;   // (m, ...): Σ_r kt Ak[m, r] and Σ_c vt Av[m, c]

  // The feature maps' adjoints, per token.
  Halide::Func q_dot;          // (i, c, h, b): Σ_r ∂L/∂fq fq
  Halide::Func kn;             // (r, i, c, h, b): rms(xi(k)), before the affine
  Halide::Func k_dot, k_xdot;  // Σ_r g_kn kn, and Σ_r g_xk xi(k)
  Halide::Func g_xk;           // (r, ...): the gradient of xi(k)
  Halide::Func vn;             // (r, ...): rms(v)
  Halide::Func v_dot;          // Σ_r g_vn vn
  Halide::Func dq, dk, dv;     // (r, h, t, b)
  Halide::RDom r_qdot, r_kdot, r_kxdot, r_vdot;

  // Parameter gradients, this batch element's share (the generator sums over the batch).
  // Λ: with P_i, W_i the adjoint and forward writes and A_i, X_i the states at token i,
  // ∂L/∂(Δ A) = Σ over the decay steps of A_t conj(Λ X_{t-1}), per mode; within a chunk that
  // is Σ_i (i + 1)(P_i conj(X_i) − conj(W_i) A_i) + len R conj(X_end) summed over channels,
  // R the adjoint entering the chunk. Per token and mode, P conj(X) is conj(w2 p + w gw_read)
  // and conj(W) A is conj(B conj(hk + hv)).
  CxFunc mode_terms;                    // (m, h, b): Σ_tokens (i + 1)(w2 p + w gw_read − B conj(hk + hv)), double
  CxFunc end_terms;                     // (m, h, b): Σ_chunks len Σ_r R conj(X_end), both scans, double
  CxFunc d_dta;                         // (m, h, b): ∂L/∂(Δ A_m)
  CxFunc d_b;                           // (m, h, b): Σ_tokens hk + hv
  CxFunc gram_grad;                     // (m, m2, h, b): Σ_tokens gw_read[m] p[m2] = conj(∂L/∂G)
  CxFunc c_grad;                        // (col, row, h, b): conj(∂L/∂C[row, col])
  Halide::Func d_gk, d_bk, d_gv, d_bv;  // (r, h, b)
  Halide::Func d_log_dt;                // (h, b)
  Halide::Func d_a_re_log, d_a_im;      // (m, h, b)
  Halide::Func d_b_mode;                // (ri, m, h, b)
  Halide::Func d_c_mix;                 // (ri, col, row, h, b)
  Halide::Func d_state_k_in, d_state_v_in;  // (ri, r, m, h, b)
  Halide::RDom r_tokens, r_chunks_k, r_chunks_v, r_feature_tokens, r_gram, r_c, r_modes;
};

// masking: see Masking (grid.h).
IdaBackwardStages ida_backward_algorithm(const IdaBackwardInputs &in, int chunk, Masking masking = Masking::none);

}  // namespace fsattn
