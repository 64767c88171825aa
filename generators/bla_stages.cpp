#include "bla_stages.h"

#include "dirichlet.h"

#include <limits>

using namespace Halide;

namespace fsattn {

BlaWrites bla_writes(const Func &log_gamma, const Expr &phase, const Expr &modes, const Expr &period, const Expr &slots,
                     const ChunkGrid &g) {
  const Vars &x = vars();
  BlaWrites w;
  w.gamma_pow = Func("gamma_pow");
  // A log γ outside [-inf < log γ <= 0] gives NaN, so that every output it reaches is NaN:
  // the CPU entry points refuse such values, but a CUDA call's parameters are device memory
  // that the host does not read.
  Expr lg = log_gamma(x.h);
  w.gamma_pow(x.n, x.h) = select(lg <= 0.0f && lg > Float(32).min(), exp(cast<float>(x.n) * lg),
                                 Expr(std::numeric_limits<float>::quiet_NaN()));
  w.decay_pow = CxFunc("bla_decay_pow", true);
  w.decay_pow.define({x.n, x.m, x.h}, Cx(w.gamma_pow(x.n, x.h)));

  w.slot_rotor = dirichlet_anchor_rotors(modes, slots);
  w.token_rotor = Func("token_rotor");
  w.token_rotor(x.i, x.c) = dirichlet_rotor(phase + cast<double>(g.token(x.i, x.c)), modes, period);
  w.phi = Func("phi");
  w.phi(x.m, x.i, x.c) = cast<float>(dirichlet_between(w.slot_rotor(x.m), w.token_rotor(x.i, x.c), modes) / period);
  w.write = CxFunc("bla_write", true);
  w.write.define({x.m, x.i, x.c, x.h, x.b}, Cx(w.phi(x.m, x.i, x.c)));
  return w;
}

BlaSoftmax bla_softmax(const CxFunc &z, const Expr &scale, const Expr &slots) {
  const Vars &x = vars();
  BlaSoftmax s;
  auto z_at = [&](const Expr &m) { return z(m, x.i, x.c, x.h, x.b).re; };
  s.r_max = RDom(0, slots, "r_max");
  s.zmax = Func("zmax");
  s.zmax(x.i, x.c, x.h, x.b) = Float(32).min();
  s.zmax(x.i, x.c, x.h, x.b) = max(s.zmax(x.i, x.c, x.h, x.b), z_at(s.r_max));
  // scale > 0, so the largest scale·z is scale·zmax: no exponent exceeds 0.
  s.ez = Func("ez");
  s.ez(x.m, x.i, x.c, x.h, x.b) = exp(scale * (z_at(x.m) - s.zmax(x.i, x.c, x.h, x.b)));
  s.r_den = RDom(0, slots, "r_den");
  s.den = Func("den");
  s.den(x.i, x.c, x.h, x.b) = 0.0f;
  s.den(x.i, x.c, x.h, x.b) += s.ez(s.r_den, x.i, x.c, x.h, x.b);
  s.pi = CxFunc("pi", true);
  s.pi.define({x.m, x.i, x.c, x.h, x.b}, Cx(s.ez(x.m, x.i, x.c, x.h, x.b) / s.den(x.i, x.c, x.h, x.b)));
  return s;
}

}  // namespace fsattn
