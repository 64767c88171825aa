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
  Halide::Var tau{"tau"};  // another token of the same chunk (one that token i's state holds)
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

// Which reductions over the contributing tokens tau <= i of a chunk (ChunkGrid) run over the
// whole chunk with later tokens' terms cleared ("masked") instead of bounded by i.
// The CUDA form also sums some reads by channels over the lag instead of the token
// (ChunkGrid::lag_channel_reads).
enum class Masking {
  none,  // every one bounded: half the work (the CPU schedules)
  gpu,   // the within-chunk sums of the reads by slots (read_by_slots, scan.h), and the reads
         // by channels summed over the lag (the CUDA schedules)
  all,   // every one (the baselines)
};

// Tokens t = c * L + i, 0 <= i < L, 0 <= c < N. The last chunk may be partial.
//
// A scan runs forward (the state at token i holds the tokens up to i) or, for the adjoint
// of a forward scan, in reverse (the state at token i holds the tokens from i to the end;
// the reverse state entering a chunk is the one after its last token). Both use the same
// chunks, so a backward pass can pair each chunk's forward and adjoint states.
struct ChunkGrid {
  Halide::Expr T;  // tokens in the call
  int L;           // chunk length (a schedule knob; results do not depend on it)
  Halide::Expr N;  // number of chunks, ceil(T / L)
  // Which reductions over the contributing tokens the call masks (see Masking).
  // Halide 14's autoschedulers emit invalid schedules (unrolled loops whose extent depends on
  // i) for the bounded form, so their baselines are built masked.
  Masking masking = Masking::none;
  bool masked = false;   // whether this grid's own reductions are: slot_reads() may set it
  bool reverse = false;  // see above; made by reversed()

  ChunkGrid(Halide::Expr T_, int L_, Masking masking_ = Masking::none)
      : T(std::move(T_)), L(L_), N((T + (L_ - 1)) / L_), masking(masking_), masked(masking_ == Masking::all) {}
  ChunkGrid reversed() const {
    ChunkGrid g = *this;
    g.reverse = !reverse;
    return g;
  }
  // The grid that the reads by slots use (read_by_slots, scan.cpp).
  ChunkGrid slot_reads() const {
    ChunkGrid g = *this;
    g.masked = masking != Masking::none;
    return g;
  }
  // Whether the forward reads by channels with one write weight per slot sum over the lag
  // n = i - tau, masked, instead of over the token tau (read_by_channels, scan.cpp).
  bool lag_channel_reads() const { return masking == Masking::gpu; }
  Halide::Expr token(const Halide::Expr &i, const Halide::Expr &c) const { return c * L + i; }
  // Tokens actually present in chunk c.
  Halide::Expr length(const Halide::Expr &c) const { return Halide::min(L, T - c * L); }
  Halide::Expr valid(const Halide::Expr &i, const Halide::Expr &c) const { return token(i, c) < T; }

  // Index of the state entering chunk c, in a state indexed 0..N: forward, the state before
  // the chunk (c); in reverse, the state after it (c + 1). The scan's last state is at
  // exit_index(): forward N (the final state), in reverse 0 (the initial state's adjoint).
  Halide::Expr entering(const Halide::Expr &c) const { return reverse ? c + 1 : c; }
  Halide::Expr exit_index() const { return reverse ? Halide::Expr(0) : N; }
  // Decays from the entering state to the state at token i: forward i + 1, in reverse
  // len - 1 - i (the reverse state at i holds token i itself undecayed).
  Halide::Expr read_age(const Halide::Expr &i, const Halide::Expr &c) const {
    return reverse ? Halide::clamp(length(c) - 1 - i, 0, L) : i + 1;
  }
  // Decays from token i's write to the state leaving the chunk: forward len - 1 - i; in
  // reverse i + 1 (the adjoint of the state before the chunk). Tokens past the end of the
  // sequence write zero; their exponent is clamped to stay in the table.
  Halide::Expr carry_age(const Halide::Expr &i, const Halide::Expr &c) const {
    return reverse ? Halide::clamp(i + 1, 0, L) : Halide::clamp(length(c) - 1 - i, 0, L);
  }
  // Decays from token tau's write to the state at token i, where tau contributes.
  Halide::Expr lag(const Halide::Expr &tau, const Halide::Expr &i) const { return reverse ? tau - i : i - tau; }

  // The tokens tau of a chunk that the state at token i holds (tau <= i; in reverse
  // tau >= i), as a reduction domain, and a term of its reduction.
  Halide::RDom contributing_tokens(const Halide::Var &i, const std::string &name) const {
    Halide::RDom r(0, L, name);
    if (!masked) r.where(reverse ? r.x >= i : r.x <= i);
    return r;
  }
  // The mask clears the bits of a later token's term. Not a select on the term: Halide trims
  // the bounds of Funcs called inside a select's branches by its condition, which would bring
  // back the bounds that depend on i. Not a multiplication by 0 or 1: a NaN or Inf in a later
  // token's input would then reach token i's output (NaN x 0 = NaN), against the locality of
  // non-finite inputs (docs/testing.md, Reliability).
  Halide::Expr causal(const Halide::Expr &term, const Halide::RVar &tau, const Halide::Var &i) const {
    if (!masked) return term;
    const Halide::Type bits = Halide::UInt(term.type().bits());
    const Halide::Expr keep = Halide::select(reverse ? tau >= i : tau <= i, bits.max(), bits.min());
    return Halide::reinterpret(term.type(), Halide::reinterpret(bits, term) & keep);
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

// f(..., b) summed over the batch b in [0, batches), in order: a parameter's gradient.
inline Halide::Func batch_sum(const Halide::Func &f, const Halide::Expr &batches, const std::string &name) {
  std::vector<Halide::Var> args = f.args();
  args.pop_back();
  std::vector<Halide::Expr> at(args.begin(), args.end());
  Halide::RDom rb(0, batches, name + "_batch");
  at.push_back(rb.x);
  Halide::Func out(name);
  out(args) = Halide::cast(f.value().type(), 0);
  out(args) += f(at);
  return out;
}

}  // namespace fsattn
