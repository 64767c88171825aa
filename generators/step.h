// One decoding step of each mixer (docs/spec.md §5, fsattn_*_step): one token per sequence, the
// state updated by one step of the recurrence and read by the token's query. Per head this
// is O(M (Dk + Dv) + M^2) for IDA (the mixing as C^T (C p), not through G = C^T C, whose
// M^3 would dominate) and O(S (Dk + Dv)) for BLA. The state may be updated in place. On
// the CPU the readout reads the old state (o is realized first, as the first output), then
// the new state is written, each element from the old one read in the same iteration;
// nothing is allocated after the state is written, so a failed call leaves the state as it
// was. On CUDA each thread reads the elements it writes before it writes them
// (schedules/cuda/), and a failed call fills every output with NaN, states included.
#pragma once

#include "bla_stages.h"
#include "ida_stages.h"

namespace fsattn {

// b read with the indices of `dims` clamped to its bounds: "<name>_clamped"; b itself where
// not `clamp`. (Not BoundaryConditions::repeat_edge, whose clamps are marked likely: Halide
// 14 then splits the CUDA steps' fused loops at them, and the split loop of BLA's value
// state lost its body.)
Halide::Func clamped_view(const Halide::Func &b, const std::vector<Halide::Expr> &mins,
                          const std::vector<Halide::Expr> &extents, const std::vector<int> &dims);
template <typename Buf>
Halide::Func clamped_view(const Buf &b, const std::vector<int> &dims, bool clamp) {
  if (!clamp) return Halide::Func(b);
  std::vector<Halide::Expr> mins, extents;
  for (int d = 0; d < b.dimensions(); ++d) {
    mins.push_back(b.dim(d).min());
    extents.push_back(b.dim(d).extent());
  }
  return clamped_view(Halide::Func(b), mins, extents, dims);
}

struct IdaStepInputs {
  Halide::Func q, k, v;                                                // (d, h, t, b), t = 0 only
  Halide::Func gk, bk, gv, bv, log_dt, a_re_log, a_im, b_mode, c_mix;  // as ida_forward's
  Halide::Func state_k, state_v;                                       // (ri, r, m, h, b)
  Halide::Expr eps, dk, dv, modes;
};

struct IdaStepStages {
  ChunkGrid grid;  // one chunk of one token
  IdaFeatures feat;
  IdaModes modes;
  CxFunc key_new, value_new;              // (r, m, h, b): Λ X + B x, as the states' writes read it
  CxFunc key_read, value_read;            // the same, as the token's reads (p, o) read it
  Halide::Func state_k_in, state_v_in;    // the old states as read: the inputs or their clamped views
  Halide::Func c_mix;                     // (ri, col, row, h): the mixing as read
  Halide::Func state_k_out, state_v_out;  // (ri, r, m, h, b)
  CxFunc p, cp, w;                        // (m, h, b): p = Xk fq, cp = C p, w = C^T cp
  Halide::Func o_sum;                     // (r, h, t, b) = Re(Xv^T w)
  Halide::Func o;                         // (r, h, t, b) = o_sum (a pure output, which CUDA fuses with the state's)
  Halide::RDom r_p, r_cp, r_w, r_o;
};
IdaStepStages ida_step_algorithm(const IdaStepInputs &in);

struct BlaStepInputs {
  Halide::Func q, k, v;           // (d, h, t, b), t = 0 only
  Halide::Func log_gamma;         // (h)
  Halide::Func state_k, state_v;  // (r, m, h, b)
  Halide::Expr phase, period, modes, slots, scale, dk, dv;
};

struct BlaStepStages {
  ChunkGrid grid;
  BlaWrites writes;
  Halide::Func key_new, value_new;        // (r, m, h, b): γ X + φ x
  Halide::Func v, state_v_in;             // v and the old value state as read (clamped views, or not)
  Halide::Func state_k_out, state_v_out;  // (r, m, h, b)
  Halide::Func z;                         // (m, h, b) = Ks q
  Halide::Func zmax, ez, den;             // the softmax over slots
  Halide::Func o_sum;                     // (r, h, t, b) = Σ_m exp(scale (z − zmax)) Vs
  Halide::Func o;                         // (r, h, t, b) = o_sum / den = Σ_m π Vs
  Halide::RDom r_z, r_max, r_den, r_o;
};
BlaStepStages bla_step_algorithm(const BlaStepInputs &in);

}  // namespace fsattn
