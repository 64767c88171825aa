// The chunked diagonal scan (docs/spec.md §3), shared by both mixers and both passes.
//
// A state X[m, r] (slot/mode m, channel r) per (batch, head) evolves as
//     X_t[m, r] = λ_m X_{t-1}[m, r] + b_t[m] x_t[r]
// with λ complex (IDA) or real (BLA) and b_t the write weight. Tokens are cut into chunks
// of L; only the chunk-to-chunk carry is serial, everything else is parallel per chunk.
// On a reversed grid (ChunkGrid::reversed) the same code runs the recurrence from the last
// token to the first, X_t = λ X_{t+1} + b_t x_t, with the "initial" state after the last
// token entering undecayed: the adjoint of a forward scan (a backward pass's state gradient).
#pragma once

#include "complex.h"
#include "grid.h"

namespace fsattn {

struct ScanInputs {
  CxFunc decay_pow;       // (n, m, h): λ_m^n for 0 <= n <= L, computed as exp(n log λ)
  bool decay_per_slot;    // false: decay_pow does not depend on m (BLA: one γ per head)
  CxFunc write;           // (m, i, c, h, b): write weight b of token (i, c) on slot m
  bool write_per_token;   // false: write does not depend on (i, c) (IDA: B_m)
  Halide::Func x;         // (r, i, c, h, b): the written vector, zero past the last token
  CxFunc init;            // (r, m, h, b): the state before the first token
  Halide::Expr slots;     // extent of m
  Halide::Expr channels;  // extent of r
  // false: write does not depend on the batch b (the forward passes' φ and B_m); true for
  // data-dependent weights (a backward pass's adjoint scans).
  bool write_per_batch = false;
};

struct ScanStages {
  CxFunc coef;                // (i, m, c, h[, b]): λ_m^carry_age b_i[m], the weight of token i in the carry
                              // (b only where the write weight depends on it)
  CxFunc carry;               // (r, m, c, h, b): Σ_i coef x_i, the chunk's own contribution to the state it leaves
  CxFunc state;               // (r, m, c, h, b), 0 <= c <= N: forward, the state before chunk c (state(N) is
                              // final); in reverse, the state after chunk c - 1 (state(0) is the last)
  Halide::RDom carry_tokens;  // the reduction of carry
  Halide::RDom chunks;        // the serial update of state
};

// `shared_coef`: the carry weights of another scan with the same decay and write weights
// (BLA's key and value scans), used instead of computing them again.
ScanStages chunked_scan(const ScanInputs &in, const ChunkGrid &g, const CxFunc *shared_coef = nullptr);

// Reads of the state at each token i of a chunk (including token i's own write).

// Pass 1: read the state at each token with a real query over the channels,
//     out_i[m] = Σ_r X_i[m, r] query_i[r]          (one value per slot)
struct ChannelRead {
  Halide::Func qx;                      // (tau, i, c, h, b): query_i · x_tau within a chunk, tau contributing to i
  Halide::Func decay_lag;               // (tau, i, h): λ^lag(tau, i), only where the decay is per head
  Halide::Func qxd;                     // (tau, i, c, h, b): qx · λ^lag, only where the decay is per head
  CxFunc inter;                         // (m, i, c, h, b): Σ_r state(c)[m, r] query_i[r]
  CxFunc intra;                         // (m, i, c, h, b): what the chunk's own tokens up to i contribute
  CxFunc out;                           // (m, i, c, h, b)
  Halide::RDom r_inter, r_qx, r_intra;  // r_intra: over the contributing tokens, or the lags
};
ChannelRead read_by_channels(const ScanInputs &in, const ScanStages &s, const Halide::Func &query, const ChunkGrid &g,
                             const std::string &prefix);

// Pass 2: read the state at each token with slot weights u (complex or real),
//     out_i[r] = Re Σ_m u_i[m] X_i[m, r]           (one real value per channel)
struct SlotRead {
  CxFunc uw;               // (m, i, c, h, b): u_i[m] b[m] where the write weight is per slot, or
                           // u[m] b_i[m] where the read weight is (see read_by_slots)
  CxFunc ud;               // (m, i, c, h, b): u_i[m] λ_m^read_age
  Halide::Func inter;      // (r, i, c, h, b): Re Σ_m ud[m] state(c)[m, r]
  Halide::Func decay_lag;  // (tau, i, h): λ^lag(tau, i), only where the decay is per head
  Halide::Func e;          // (tau, i, c, h, b): Re Σ_m u_i[m] λ_m^lag b_tau[m], tau contributing to i;
                           // where the write (read) weight is per slot, indexed by the lag and the
                           // reading (writing) token instead: (n, i, ...) = Re Σ_m uw(m, i) λ_m^n
  Halide::Func intra;      // (r, i, c, h, b): Σ_tau e x_tau[r]
  Halide::Func out;        // (r, i, c, h, b)
  Halide::RDom r_inter, r_e, r_intra;
};
// u_per_token: false when u depends on the slot only (u(m, i, ...) is read at i = 0).
SlotRead read_by_slots(const ScanInputs &in, const ScanStages &s, const CxFunc &u, const ChunkGrid &g,
                       const std::string &prefix, bool u_per_token = true);

}  // namespace fsattn
