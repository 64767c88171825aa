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
  // How reductions over the earlier tokens tau <= i of a chunk are bounded: by i (half the
  // work), or, when masked, over the whole chunk with later tokens multiplied by zero. Halide
  // 14's autoschedulers emit invalid schedules (unrolled loops whose extent depends on i) for
  // the bounded form, so their baselines are built masked.
  bool masked = false;

  ChunkGrid(Halide::Expr T_, int L_, bool masked_ = false)
      : T(std::move(T_)), L(L_), N((T + (L_ - 1)) / L_), masked(masked_) {}
  Halide::Expr token(const Halide::Expr &i, const Halide::Expr &c) const { return c * L + i; }
  // Tokens actually present in chunk c.
  Halide::Expr length(const Halide::Expr &c) const { return Halide::min(L, T - c * L); }
  Halide::Expr valid(const Halide::Expr &i, const Halide::Expr &c) const { return token(i, c) < T; }

  // The tokens tau <= i of a chunk, as a reduction domain, and a term of its reduction.
  Halide::RDom earlier_tokens(const Halide::Var &i, const std::string &name) const {
    Halide::RDom r(0, L, name);
    if (!masked) r.where(r.x <= i);
    return r;
  }
  // The mask multiplies: Halide trims the bounds of Funcs called inside a select's branches
  // by its condition, which would bring back the bounds that depend on i.
  Halide::Expr causal(const Halide::Expr &term, const Halide::RVar &tau, const Halide::Var &i) const {
    return masked ? term * Halide::cast(term.type(), tau <= i) : term;
  }
};

// x(d, h, t, b) with `channels` values of d, viewed chunk by chunk as (d, i, c, h, b); zero
// past the last token and past the last channel, so that schedules may compute whole
// register tiles beyond the true sizes without reading outside the input.
inline Halide::Func chunked(const Halide::Func &x, const Halide::Expr &channels, const ChunkGrid &g,
                            const std::string &name) {
  const Vars &v = vars();
  Halide::Func f(name);
  Halide::Expr t = g.token(v.i, v.c);
  // (Clamped on both sides: autoscheduled schedules may also compute before the first.)
  f(v.r, v.i, v.c, v.h, v.b) =
      Halide::select(0 <= t && t < g.T && 0 <= v.r && v.r < channels,
                     x(Halide::clamp(v.r, 0, channels - 1), v.h, Halide::clamp(t, 0, g.T - 1), v.b), 0.0f);
  return f;
}

}  // namespace fsattn
