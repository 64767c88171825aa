// Complex arithmetic on Halide expressions, with real numbers as a special case.
//
// A Cx holds (re, im); an undefined `im` means "this value is real". Every operation skips
// the imaginary work it does not need, so the same stage code serves IDA (complex modes
// Λ_m, complex B) and BLA (real decay γ, real write weights) without paying complex
// arithmetic for the real mixer.
#pragma once

#include "Halide.h"

#include <vector>

namespace fsattn {

struct Cx {
  Halide::Expr re, im;  // im undefined: the value is real

  Cx() = default;
  Cx(Halide::Expr re_) : re(std::move(re_)) {}  // NOLINT: a real number is a complex number
  Cx(Halide::Expr re_, Halide::Expr im_) : re(std::move(re_)), im(std::move(im_)) {}

  bool is_real() const { return !im.defined(); }
  Halide::Expr imag() const { return is_real() ? Halide::cast(re.type(), 0) : im; }
};

inline Cx operator+(const Cx &a, const Cx &b) {
  if (a.is_real() && b.is_real()) return {a.re + b.re};
  return {a.re + b.re, a.imag() + b.imag()};
}

inline Cx operator*(const Cx &a, const Cx &b) {
  if (a.is_real() && b.is_real()) return {a.re * b.re};
  if (b.is_real()) return {a.re * b.re, a.im * b.re};
  if (a.is_real()) return {a.re * b.re, a.re * b.im};
  return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}

inline Cx conj(const Cx &a) { return a.is_real() ? a : Cx(a.re, -a.im); }

inline Cx operator-(const Cx &a, const Cx &b) {
  if (a.is_real() && b.is_real()) return {a.re - b.re};
  return {a.re - b.re, a.imag() - b.imag()};
}

// Re(a * b), without computing the imaginary part.
inline Halide::Expr real_of_product(const Cx &a, const Cx &b) {
  if (a.is_real() || b.is_real()) return (a * b).re;
  return a.re * b.re - a.im * b.im;
}

// exp(log_mag + i·phase).
inline Cx exp_polar(const Halide::Expr &log_mag, const Halide::Expr &phase) {
  Halide::Expr mag = Halide::exp(log_mag);
  return {mag * Halide::cos(phase), mag * Halide::sin(phase)};
}

inline Cx cast_cx(Halide::Type t, const Cx &a) {
  if (a.is_real()) return {Halide::cast(t, a.re)};
  return {Halide::cast(t, a.re), Halide::cast(t, a.im)};
}

// A Func whose values are complex (a Tuple (re, im)) or real (one value). Stage code reads
// and defines it through Cx, so it never needs to know which.
class CxFunc {
 public:
  CxFunc() = default;
  CxFunc(const std::string &name, bool real) : f_(name), real_(real) {}

  bool is_real() const { return real_; }
  Halide::Func &func() { return f_; }
  const Halide::Func &func() const { return f_; }

  template <typename... Args>
  Cx operator()(Args &&...args) const {
    std::vector<Halide::Expr> a{Halide::Expr(args)...};
    return at(a);
  }
  Cx at(const std::vector<Halide::Expr> &args) const {
    Halide::Func f = f_;  // Func handles share their definition
    if (real_) return {f(args)};
    return {f(args)[0], f(args)[1]};
  }

  // f(args) = value
  void define(const std::vector<Halide::Var> &args, const Cx &value) {
    if (real_) {
      f_(args) = value.re;
    } else {
      f_(args) = Halide::Tuple(value.re, value.imag());
    }
  }
  // f(args) = undef: a pure definition that writes nothing, for Funcs whose updates fill
  // every value that is read
  void define_undef(const std::vector<Halide::Var> &args) {
    if (real_) {
      f_(args) = Halide::undef<float>();
    } else {
      f_(args) = Halide::Tuple(Halide::undef<float>(), Halide::undef<float>());
    }
  }
  // f(args) = value, for an update definition (args may hold RVars)
  void update(const std::vector<Halide::Expr> &args, const Cx &value) {
    if (real_) {
      f_(args) = value.re;
    } else {
      f_(args) = Halide::Tuple(value.re, value.imag());
    }
  }

 private:
  Halide::Func f_;
  bool real_ = false;
};

}  // namespace fsattn
