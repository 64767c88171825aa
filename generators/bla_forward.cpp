#include "bla_forward.h"

using namespace Halide;

namespace fsattn {

CxFunc real_state(const Func &stored, const std::string &name) {
  const Vars &x = vars();
  CxFunc f(name, true);
  f.define({x.r, x.m, x.h, x.b}, Cx(stored(x.r, x.m, x.h, x.b)));
  return f;
}

Func final_state(const CxFunc &state, const Expr &index, const std::string &name) {
  const Vars &x = vars();
  Func f(name);
  f(x.r, x.m, x.h, x.b) = state(x.r, x.m, index, x.h, x.b).re;
  return f;
}

BlaForwardStages bla_forward_algorithm(const BlaForwardInputs &in, int chunk, Masking masking) {
  const Vars &x = vars();
  BlaForwardStages s{ChunkGrid(in.seqlen, chunk, masking)};
  const ChunkGrid &g = s.grid;

  s.q = chunked(in.q, in.dk, g, "q_chunked");
  s.k = chunked(in.k, in.dk, g, "k_chunked");
  s.v = chunked(in.v, in.dv, g, "v_chunked");
  s.writes = bla_writes(in.log_gamma, in.phase, in.modes, in.period, in.slots, g);

  s.key_in = {s.writes.decay_pow, false, s.writes.write, true, s.k, real_state(in.state_k_in, "init_k"),
              in.slots,           in.dk};
  s.key_scan = chunked_scan(s.key_in, g);
  s.z = read_by_channels(s.key_in, s.key_scan, s.q, g, "z");

  s.softmax = bla_softmax(s.z.out, in.scale, in.slots);

  s.value_in = {s.writes.decay_pow, false, s.writes.write, true, s.v, real_state(in.state_v_in, "init_v"),
                in.slots,           in.dv};
  s.value_scan = chunked_scan(s.value_in, g, &s.key_scan.coef);  // same γ and φ: same weights
  s.o_read = read_by_slots(s.value_in, s.value_scan, s.softmax.pi, g, "o");

  s.o = Func("o");
  s.o(x.r, x.h, x.t, x.b) = s.o_read.out(x.r, x.t % chunk, x.t / chunk, x.h, x.b);
  s.state_k_out = final_state(s.key_scan.state, g.exit_index(), "state_k_out");
  s.state_v_out = final_state(s.value_scan.state, g.exit_index(), "state_v_out");
  return s;
}

}  // namespace fsattn
