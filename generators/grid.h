// Shared loop variables and the chunk grid: how a sequence of T tokens is cut into chunks.
#pragma once

#include "Halide.h"

namespace fsattn {

// One name per index, used by every stage and schedule, so a schedule can name the loops of
// any stage. Halide identifies Vars by name.
struct Vars {
  Halide::Var r{"r"};      // channel of a state row (Dk or Dv)
  Halide::Var m{"m"};      // mode (IDA) or slot (BLA)
  Halide::Var m2{"m2"};    // second mode index of an M×M matrix
  Halide::Var i{"i"};      // token within its chunk
  Halide::Var tau{"tau"};  // earlier token within the same chunk (tau <= i)
  Halide::Var n{"n"};      // exponent of a decay power
  Halide::Var c{"c"};      // chunk
  Halide::Var h{"h"};      // head
  Halide::Var b{"b"};      // batch
  Halide::Var t{"t"};      // absolute token index in a call
  Halide::Var ri{"part"};  // 0 = real part, 1 = imaginary part ("ri" would clash with the split of r)
};
inline const Vars &vars() {
  static const Vars v;
  return v;
}

// Tokens t = c * L + i, 0 <= i < L, 0 <= c < N. The last chunk may be partial.
struct ChunkGrid {
  Halide::Expr T;  // tokens in the call
  int L;           // chunk length (a schedule knob; results do not depend on it)
  Halide::Expr N;  // number of chunks, ceil(T / L)

  ChunkGrid(Halide::Expr T_, int L_) : T(std::move(T_)), L(L_), N((T + (L_ - 1)) / L_) {}
  Halide::Expr token(const Halide::Expr &i, const Halide::Expr &c) const { return c * L + i; }
  // Tokens actually present in chunk c.
  Halide::Expr length(const Halide::Expr &c) const { return Halide::min(L, T - c * L); }
  Halide::Expr valid(const Halide::Expr &i, const Halide::Expr &c) const { return token(i, c) < T; }
};

// x(d, h, t, b) viewed chunk by chunk as (d, i, c, h, b), zero past the last token.
inline Halide::Func chunked(const Halide::Func &x, const ChunkGrid &g, const std::string &name) {
  const Vars &v = vars();
  Halide::Func f(name);
  Halide::Expr t = g.token(v.i, v.c);
  f(v.r, v.i, v.c, v.h, v.b) =
      Halide::select(t < g.T, x(v.r, v.h, Halide::min(t, g.T - 1), v.b), 0.0f);
  return f;
}

}  // namespace fsattn
