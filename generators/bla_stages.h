// BLA's own stages (docs/spec.md §2): the per-head decay, the Dirichlet write weights φ, and the
// softmax over slots between the two passes.
#pragma once

#include "complex.h"
#include "grid.h"

namespace fsattn {

struct BlaWrites {
  Halide::Func gamma_pow;    // (n, h) = γ_h^n = exp(n log γ_h), 0 <= n <= L
  CxFunc decay_pow;          // (n, m, h) = gamma_pow(n, h): one decay for every slot
  Halide::Func slot_rotor;   // (m): Dirichlet rotors of the anchors a_m = m W / S
  Halide::Func token_rotor;  // (i, c): Dirichlet rotors of the token positions
  Halide::Func phi;          // (m, i, c) = D_M(a_m − t) / W, t = pos0 + c L + i, float
  CxFunc write;              // (m, i, c, h, b) = phi(m, i, c)
};
// phase = pos0 mod W, reduced exactly by the caller, in double; positions within the call
// are formed as phase + c L + i.
BlaWrites bla_writes(const Halide::Func &log_gamma, const Halide::Expr &phase, const Halide::Expr &modes,
                     const Halide::Expr &period, const Halide::Expr &slots, const ChunkGrid &g);

// π = softmax over slots of scale · z.
struct BlaSoftmax {
  Halide::Func zmax;  // (i, c, h, b) = max_m z
  Halide::Func ez;    // (m, i, c, h, b) = exp(scale (z − zmax))
  Halide::Func den;   // (i, c, h, b) = Σ_m ez
  CxFunc pi;          // (m, i, c, h, b)
  Halide::RDom r_max, r_den;
};
BlaSoftmax bla_softmax(const CxFunc &z, const Halide::Expr &scale, const Halide::Expr &slots);

}  // namespace fsattn
