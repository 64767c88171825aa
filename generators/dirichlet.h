// The Dirichlet kernel of BLA (docs/spec.md §2), D_M(x) = 1 + 2 Σ_{m=1..M} cos(2π m x / W), used
// both to write tokens onto slots (φ) and to interpolate a slot state back into a window.
//
// It is evaluated in closed form, D_M(x) = sin((2M+1)θ) / sin(θ) with θ = π x / W, and x is
// always a difference a − y of two positions. The sines of θ = α − β come from "rotors"
// (cos, sin of α and of (2M+1)α) of each position separately, so a table of S slot rotors and
// one of T token rotors give all S·T weights with a few multiplications each, in double.
// Shifting a position by W flips the sign of both sines, so the rotors never need positions
// reduced modulo W; only the caller's start position is reduced (on the host, exactly).
#pragma once

#include "Halide.h"

namespace fsattn {

// (cos α, sin α, cos (2M+1)α, sin (2M+1)α) in double, for the half-angle α = π y / W of a
// position y (double, in tokens).
Halide::Tuple dirichlet_rotor(const Halide::Expr &position, const Halide::Expr &modes, const Halide::Expr &period);
// The rotors of the slot anchors a_m = m W / S, as a Func of m (α = π m / S, exactly).
Halide::Func dirichlet_anchor_rotors(const Halide::Expr &modes, const Halide::Expr &slots);

// D_M(a − y) in double, from rotor(a) and rotor(y).
Halide::Expr dirichlet_between(const Halide::FuncRef &rotor_a, const Halide::FuncRef &rotor_y,
                               const Halide::Expr &modes);

// Reconstruction of the blurry history from a slot state (docs/spec.md §2, "why this is the
// blurry window"): for lag ℓ behind the newest token at position t,
//     out[ℓ] = (1/S) Σ_j D_M(a_j − (t − ℓ)) state[j]
// which is exact trigonometric interpolation of the S slot samples when S ≥ 2M+1.
struct DirichletInterpolation {
  Halide::Func slot_rotor;   // (m): rotors of the anchors a_m = m W / S
  Halide::Func point_rotor;  // (n): rotors of the points t − ℓ_n
  Halide::Func weight;       // (m, n): D_M(a_m − (t − ℓ_n)) / S, float
  Halide::Func out;          // (r, n, h, b)
  Halide::RDom r_slots;
};
// state (r, m, h, b); lags (n) in double; phase = t mod W in double.
DirichletInterpolation dirichlet_interpolation(const Halide::Func &state, const Halide::Func &lags,
                                               const Halide::Expr &phase, const Halide::Expr &modes,
                                               const Halide::Expr &period, const Halide::Expr &slots);

}  // namespace fsattn
