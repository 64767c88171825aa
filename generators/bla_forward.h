// The BLA forward pass (docs/spec.md §2) composed from its stages:
//   Dirichlet writes φ -> key scan read by q (z) -> π = softmax(scale z) -> value scan read by π (o).
#pragma once

#include "bla_stages.h"
#include "scan.h"

namespace fsattn {

struct BlaForwardInputs {
  Halide::Func q, k, v;                 // (d, h, t, b)
  Halide::Func log_gamma;               // (h)
  Halide::Func state_k_in, state_v_in;  // (r, m, h, b)
  Halide::Expr phase;                   // pos0 mod W, double
  Halide::Expr period, modes, slots, scale, dk, dv, seqlen;
};

struct BlaForwardStages {
  ChunkGrid grid;
  Halide::Func q, k, v;  // chunked (r, i, c, h, b)
  BlaWrites writes;
  ScanInputs key_in, value_in;
  ScanStages key_scan, value_scan;
  ChannelRead z;                          // z_t = Ks_t q_t
  BlaSoftmax softmax;                     // π_t
  SlotRead o_read;                        // o_t = Vs_t^T π_t
  Halide::Func o;                         // (r, h, t, b)
  Halide::Func state_k_out, state_v_out;  // (r, m, h, b)
};

// A state buffer (r, m, h, b) as a real CxFunc, and one state of a scan (index 0..N) as a buffer.
CxFunc real_state(const Halide::Func &stored, const std::string &name);
Halide::Func final_state(const CxFunc &state, const Halide::Expr &index, const std::string &name);

// masking: see Masking (grid.h).
BlaForwardStages bla_forward_algorithm(const BlaForwardInputs &in, int chunk, Masking masking = Masking::none);

}  // namespace fsattn
