// The IDA forward pass (docs/spec.md §1) composed from its stages:
//   features -> key scan read by fq (p) -> w = G p -> value scan read by w (o).
#pragma once

#include "ida_stages.h"
#include "scan.h"

namespace fsattn {

struct IdaForwardInputs {
  Halide::Func q, k, v;                 // (d, h, t, b)
  Halide::Func gk, bk, gv, bv;          // (d, h)
  Halide::Func log_dt;                  // (h)
  Halide::Func a_re_log, a_im;          // (m, h)
  Halide::Func b_mode;                  // (ri, m, h)
  Halide::Func c_mix;                   // (ri, col, row, h)
  Halide::Func state_k_in, state_v_in;  // (ri, r, m, h, b)
  Halide::Expr eps, dk, dv, modes, seqlen;
};

struct IdaForwardStages {
  ChunkGrid grid;
  IdaFeatures feat;
  IdaModes modes;
  ScanInputs key_in, value_in;
  ScanStages key_scan, value_scan;
  ChannelRead p;                          // p_t = Xk_t fq_t
  IdaMixing mix;                          // w_t = G p_t
  SlotRead o_read;                        // o_t = Re(Xv_t^T w_t)
  Halide::Func o;                         // (r, h, t, b)
  Halide::Func state_k_out, state_v_out;  // (ri, r, m, h, b)
};

// A complex state buffer (ri, r, m, h, b) as a CxFunc (r, m, h, b), and one state of a scan
// (index 0..N) as such a buffer.
CxFunc complex_state(const Halide::Func &stored, const std::string &name);
Halide::Func store_complex(const CxFunc &state, const Halide::Expr &index, const std::string &name);

// masking: see Masking (grid.h).
IdaForwardStages ida_forward_algorithm(const IdaForwardInputs &in, int chunk, Masking masking = Masking::none);

}  // namespace fsattn
