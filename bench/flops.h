// Arithmetic work of the chunked algorithms, for GFLOP/s figures. An FMA counts 2, a
// complex×real multiply-add 4, a complex multiply-add 8; O(D) per-token work is left out.
#pragma once

#include <cstdint>

namespace fsattn::bench {

// IDA forward, per token with chunk length L (docs/spec.md §1, §3):
//   key carry + key read through the chunk state      8 M Dk   (two complex×real MACs)
//   fq·k within the chunk                             2 L Dk
//   key read within the chunk (causal half)           4 M (L+1)/2 · 2 = 4 M (L+1)
//   mixing w = G p                                    8 M^2
//   value carry + value read through the chunk state  8 M Dv
//   value weights within the chunk (causal half)      2 M (L+1)
//   value read within the chunk (causal half)         (L+1) Dv
inline double ida_forward_flops_per_token(double M, double Dk, double Dv, double L) {
  return 8 * M * (Dk + Dv) + 2 * L * Dk + 6 * M * (L + 1) + 8 * M * M + (L + 1) * Dv;
}

// IDA backward, per token (ida_backward.h): the forward's pass 1 and value scan recomputed,
// then the adjoint reads, scans and mixings:
//   key carry + p through the chunk state, fq·kt, within, G p   8 M Dk + 2 L Dk + 4 M (L+1) + 8 M^2
//   value carry + g_w through the chunk state, d_o·v, within     8 M Dv + 2 L Dv + 4 M (L+1)
//   conj(g_p) = G g_w                                            8 M^2
//   ∂L/∂fq through the key state, weights, within                4 M Dk + 2 M (L+1) + (L+1) Dk
//   key adjoint carry + ∂L/∂kt through it, weights, within        8 M Dk + 4 M L + (L+1) Dk
//   hk = kt·Ak through it, kt·fq, within                          4 M Dk + 2 L Dk + 4 M (L+1)
//   the same three for the values                                 8 M Dv + 4 M L + (L+1) Dv + 4 M Dv + 2 L Dv + 4 M
//   (L+1) Σ_t g_w p^T for the gradient of G                             8 M^2
inline double ida_backward_flops_per_token(double M, double Dk, double Dv, double L) {
  const double pass1 = 8 * M * Dk + 2 * L * Dk + 4 * M * (L + 1) + 8 * M * M;
  return pass1 + 8 * M * Dv + 2 * L * Dv + 4 * M * (L + 1) + 8 * M * M + 4 * M * Dk + 2 * M * (L + 1) + (L + 1) * Dk +
         8 * M * (Dk + Dv) + 8 * M * L + (L + 1) * (Dk + Dv) + 4 * M * (Dk + Dv) + 2 * L * (Dk + Dv) + 8 * M * (L + 1) +
         8 * M * M;
}

// BLA forward, per token with S slots and chunk length L (docs/spec.md §2, §3):
//   key carry + key read through the chunk state      4 S Dk
//   q·k within the chunk                              2 L Dk
//   key read within the chunk (causal half)           S (L+1)
//   value carry + value read through the chunk state  4 S Dv
//   value weights π·φ within the chunk                2 S L
//   value read within the chunk (causal half)         (L+1) Dv
inline double bla_forward_flops_per_token(double S, double Dk, double Dv, double L) {
  return 4 * S * (Dk + Dv) + 2 * L * Dk + S * (L + 1) + 2 * S * L + (L + 1) * Dv;
}

// BLA backward, per token (bla_backward.h): the forward recomputed, the adjoint reads and
// the two reverse scans:
//   key carry + z through the chunk state, q·k, z within the chunk   4 S Dk + 2 L Dk + S (L+1)
//   value carry + dπ through the chunk state, d_o·v, dπ within        4 S Dv + 2 L Dv + S (L+1)
//   dq through the chunk state, dz·φ weights, dq within the chunk    2 S Dk + 2 S L + (L+1) Dk
//   key adjoint carry + dk through its state, φ·dz weights, within   4 S Dk + 2 S L + (L+1) Dk
//   value adjoint carry + dv through its state, φ·π weights, within  4 S Dv + 2 S L + (L+1) Dv
inline double bla_backward_flops_per_token(double S, double Dk, double Dv, double L) {
  return 10 * S * Dk + 8 * S * Dv + 2 * L * (Dk + Dv) + 2 * S * (L + 1) + 6 * S * L + (L + 1) * (2 * Dk + Dv);
}

}  // namespace fsattn::bench
