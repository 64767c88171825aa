#include "ida_forward.h"

using namespace Halide;

namespace fsattn {

CxFunc complex_state(const Func &stored, const std::string &name) {
  const Vars &x = vars();
  CxFunc f(name, false);
  f.define({x.r, x.m, x.h, x.b}, Cx(stored(0, x.r, x.m, x.h, x.b), stored(1, x.r, x.m, x.h, x.b)));
  return f;
}

Func store_complex(const CxFunc &state, const Expr &index, const std::string &name) {
  const Vars &x = vars();
  Func f(name);
  Cx s = state(x.r, x.m, index, x.h, x.b);
  f(x.ri, x.r, x.m, x.h, x.b) = select(x.ri == 0, s.re, s.imag());
  return f;
}

IdaForwardStages ida_forward_algorithm(const IdaForwardInputs &in, int chunk, Masking masking) {
  const Vars &x = vars();
  IdaForwardStages s{ChunkGrid(in.seqlen, chunk, masking)};
  const ChunkGrid &g = s.grid;

  s.feat = ida_features(in.q, in.k, in.v, in.gk, in.bk, in.gv, in.bv, in.eps, in.dk, in.dv, g);
  s.modes = ida_modes(in.log_dt, in.a_re_log, in.a_im, in.b_mode);

  s.key_in = {s.modes.decay_pow, true, s.modes.write, false, s.feat.kt, complex_state(in.state_k_in, "init_k"),
              in.modes,          in.dk};
  s.key_scan = chunked_scan(s.key_in, g);
  s.p = read_by_channels(s.key_in, s.key_scan, s.feat.fq, g, "p");

  s.mix = ida_mixing(in.c_mix, s.p.out, in.modes);

  s.value_in = {s.modes.decay_pow, true, s.modes.write, false, s.feat.vt, complex_state(in.state_v_in, "init_v"),
                in.modes,          in.dv};
  s.value_scan = chunked_scan(s.value_in, g);
  s.o_read = read_by_slots(s.value_in, s.value_scan, s.mix.w, g, "o");

  s.o = Func("o");
  s.o(x.r, x.h, x.t, x.b) = s.o_read.out(x.r, x.t % chunk, x.t / chunk, x.h, x.b);
  s.state_k_out = store_complex(s.key_scan.state, g.exit_index(), "state_k_out");
  s.state_v_out = store_complex(s.value_scan.state, g.exit_index(), "state_v_out");
  return s;
}

}  // namespace fsattn
