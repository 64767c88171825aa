#include "dirichlet.h"

#include "grid.h"

using namespace Halide;

namespace fsattn {

namespace {
constexpr double kPi = 3.14159265358979323846;

Tuple rotor_of_angle(const Expr &a, const Expr &modes) {
  Expr na = cast<double>(2 * modes + 1) * a;
  return Tuple(cos(a), sin(a), cos(na), sin(na));
}
}  // namespace

Tuple dirichlet_rotor(const Expr &position, const Expr &modes, const Expr &period) {
  return rotor_of_angle(Expr(kPi) * cast<double>(position) / cast<double>(period), modes);
}

Func dirichlet_anchor_rotors(const Expr &modes, const Expr &slots) {
  const Vars &x = vars();
  Func f("anchor_rotor");
  f(x.m) = rotor_of_angle(Expr(kPi) * cast<double>(x.m) / cast<double>(slots), modes);
  return f;
}

Expr dirichlet_between(const FuncRef &rotor_a, const FuncRef &rotor_y, const Expr &modes) {
  Tuple ra(rotor_a), ry(rotor_y);
  // sin(α − β) and sin((2M+1)(α − β)) by the difference formula.
  Expr den = ra[1] * ry[0] - ra[0] * ry[1];
  Expr num = ra[3] * ry[2] - ra[2] * ry[3];
  // At θ = kπ the ratio is 0/0 with limit 2M+1; within 1e-7 of it, the limit is closer to
  // the true value (off by ~M²θ²) than the ratio of two rounded sines (off by ~1e-16/θ).
  Expr peak = cast<double>(2 * modes + 1);
  return select(abs(den) < Expr(1e-7), peak, num / den);
}

DirichletInterpolation dirichlet_interpolation(const Func &state, const Func &lags, const Expr &phase,
                                               const Expr &modes, const Expr &period, const Expr &slots) {
  const Vars &x = vars();
  DirichletInterpolation d;
  d.slot_rotor = dirichlet_anchor_rotors(modes, slots);
  d.point_rotor = Func("point_rotor");
  d.point_rotor(x.n) = dirichlet_rotor(phase - lags(x.n), modes, period);
  d.weight = Func("weight");
  d.weight(x.m, x.n) =
      cast<float>(dirichlet_between(d.slot_rotor(x.m), d.point_rotor(x.n), modes) / cast<double>(slots));
  d.r_slots = RDom(0, slots, "r_slots");
  d.out = Func("interpolated");
  d.out(x.r, x.n, x.h, x.b) = 0.0f;
  d.out(x.r, x.n, x.h, x.b) += d.weight(d.r_slots, x.n) * state(x.r, d.r_slots, x.h, x.b);
  return d;
}

}  // namespace fsattn
