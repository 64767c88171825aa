#include "layout.h"

#include <algorithm>
#include <array>
#include <limits>
#include <string>
#include <vector>

namespace fsattn {

namespace {

Strides given(const fsattn_strides &s, int64_t T, int64_t H, int64_t D) {
  return {s.batch != 0 ? s.batch : T * H * D, s.token != 0 ? s.token : H * D, s.head != 0 ? s.head : D};
}

struct Dim {
  int64_t extent, stride;
};

std::array<Dim, 4> dims_of(const Activation &a, int64_t B, int64_t T, int64_t H) {
  return {{{a.D, 1}, {H, a.s.head}, {T, a.s.token}, {B, a.s.batch}}};
}

// Whether two elements of one tensor can share an address: taken by increasing stride, each
// dimension must step past all that the smaller ones cover (layouts that interleave
// otherwise are refused, though some share nothing).
bool overlaps_itself(const std::array<Dim, 4> &dims) {
  std::vector<Dim> d;
  for (const Dim &x : dims) {
    if (x.extent > 1) d.push_back(x);
  }
  std::sort(d.begin(), d.end(), [](const Dim &a, const Dim &b) { return a.stride < b.stride; });
  int64_t covered = 1;  // one past the largest offset the smaller dimensions reach
  for (const Dim &x : d) {
    if (x.stride < covered) return true;
    covered += x.stride * (x.extent - 1);
  }
  return false;
}

// Whether sum_k c_k s_k = r has a solution with c_k in [lo_k, hi_k], dimensions from `k` on
// (strides decreasing). Each level has at most a few candidates when strides nest; past 8 the
// answer is taken as yes.
struct Term {
  int64_t stride, lo, hi;
};
bool reachable(const std::vector<Term> &t, size_t k, int64_t r) {
  if (k == t.size()) return r == 0;
  int64_t inner_lo = 0, inner_hi = 0;
  for (size_t j = k + 1; j < t.size(); ++j) inner_lo += t[j].lo * t[j].stride, inner_hi += t[j].hi * t[j].stride;
  const int64_t s = t[k].stride;
  auto floor_div = [](int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); };
  const int64_t c_lo = std::max(t[k].lo, -floor_div(-(r - inner_hi), s));
  const int64_t c_hi = std::min(t[k].hi, floor_div(r - inner_lo, s));
  if (c_hi - c_lo >= 8) return true;
  for (int64_t c = c_lo; c <= c_hi; ++c) {
    if (reachable(t, k + 1, r - c * s)) return true;
  }
  return false;
}

// Whether an element of `a` and one of `b` share memory.
bool share_memory(const Activation &a, const Activation &b, int64_t B, int64_t T, int64_t H) {
  const auto pa = reinterpret_cast<uintptr_t>(a.ptr), pb = reinterpret_cast<uintptr_t>(b.ptr);
  const uintptr_t end_a = pa + uintptr_t(span(a.s, B, T, H, a.D)) * 4,
                  end_b = pb + uintptr_t(span(b.s, B, T, H, b.D)) * 4;
  if (end_a <= pb || end_b <= pa) return false;
  if (a.s.batch != b.s.batch || a.s.token != b.s.token || a.s.head != b.s.head) return true;
  const int64_t diff = int64_t(pb - pa);
  if (diff % 4 != 0) return true;
  // Elements i of a and j of b meet where offset(i) - offset(j) = diff / 4.
  const std::array<Dim, 4> da = dims_of(a, B, T, H), db = dims_of(b, B, T, H);
  std::vector<Term> terms;
  for (size_t k = 0; k < da.size(); ++k) terms.push_back({da[k].stride, -(db[k].extent - 1), da[k].extent - 1});
  std::sort(terms.begin(), terms.end(), [](const Term &x, const Term &y) { return x.stride > y.stride; });
  return reachable(terms, 0, diff / 4);
}

}  // namespace

CallLayout::CallLayout(const fsattn_dims *dims) {
  static const fsattn_layout dense = FSATTN_LAYOUT_INIT;
  const fsattn_layout &l = dims->layout != nullptr ? *dims->layout : dense;
  const int64_t T = dims->seqlen, H = dims->heads, Dk = dims->dk, Dv = dims->dv;
  q = given(l.q, T, H, Dk), k = given(l.k, T, H, Dk), v = given(l.v, T, H, Dv), o = given(l.o, T, H, Dv);
  d_o = given(l.d_o, T, H, Dv), dq = given(l.dq, T, H, Dk), dk = given(l.dk, T, H, Dk), dv = given(l.dv, T, H, Dv);
}

int64_t span(const Strides &s, int64_t B, int64_t T, int64_t H, int64_t D) {
  return activation(nullptr, s, D, H, T, B).span();
}

Tensor activation(const float *p, const Strides &s, int64_t D, int64_t H, int64_t T, int64_t B) {
  return Tensor(p, {D, H, T, B}, {1, s.head, s.token, s.batch});
}

void check_activations(Validator &val, int64_t B, int64_t T, int64_t H, std::initializer_list<Activation> list) {
  constexpr int64_t kInt32 = std::numeric_limits<int32_t>::max();
  constexpr int64_t kMaxElements = std::numeric_limits<int64_t>::max() / 8 / int64_t(sizeof(float));
  for (const Activation &a : list) {
    if (!val.ok()) return;
    const std::string field = std::string("dims->layout->") + a.name;
    const std::pair<const char *, int64_t> strides[3] = {
        {".batch", a.s.batch}, {".token", a.s.token}, {".head", a.s.head}};
    for (const auto &[member, stride] : strides) {
      if (stride < 0) {
        val.fail(FSATTN_ERROR_INVALID_ARGUMENT, field + member + " = " + std::to_string(stride) + " is negative");
      }
    }
    if ((T > 1 && a.s.token > kInt32) || (H > 1 && a.s.head > kInt32)) {
      val.fail(FSATTN_ERROR_UNSUPPORTED, field + ": token and head strides above 2^31 - 1 elements");
    }
    // Each term is checked, then the sum: all are non-negative and below kMaxElements.
    int64_t total = a.D, term = 0;
    const std::pair<int64_t, int64_t> steps[3] = {{B, a.s.batch}, {T, a.s.token}, {H, a.s.head}};
    for (const auto &[extent, stride] : steps) {
      if (!val.ok()) return;
      if (__builtin_mul_overflow(extent - 1, stride, &term) || term > kMaxElements || (total += term) > kMaxElements) {
        val.fail(FSATTN_ERROR_INVALID_ARGUMENT, field + ": the strides reach past the address space");
      }
    }
    if (val.ok() && a.output && overlaps_itself(dims_of(a, B, T, H))) {
      val.fail(FSATTN_ERROR_INVALID_ARGUMENT, field + ": the strides make " + a.name + "'s elements share memory");
    }
  }
  for (const Activation &a : list) {
    for (const Activation &b : list) {
      if (!val.ok()) return;
      if (&a == &b || !a.output || a.ptr == nullptr || b.ptr == nullptr) continue;
      if (share_memory(a, b, B, T, H)) {
        val.fail(FSATTN_ERROR_INVALID_ARGUMENT, std::string(a.name) + " shares memory with " + b.name +
                                                    " (an output must not overlap the call's other activations)");
      }
    }
  }
}

void check_forward_activations(Validator &val, const fsattn_dims *dims, const CallLayout &l, const float *q,
                               const float *k, const float *v, const float *o) {
  const int64_t Dk = dims->dk, Dv = dims->dv;
  check_activations(
      val, dims->batch, dims->seqlen, dims->heads,
      {{"q", q, l.q, Dk, false}, {"k", k, l.k, Dk, false}, {"v", v, l.v, Dv, false}, {"o", o, l.o, Dv, true}});
}

void check_backward_activations(Validator &val, const fsattn_dims *dims, const CallLayout &l, const float *q,
                                const float *k, const float *v, const float *d_o, const float *dq, const float *dk,
                                const float *dv) {
  const int64_t Dk = dims->dk, Dv = dims->dv;
  check_activations(val, dims->batch, dims->seqlen, dims->heads,
                    {{"q", q, l.q, Dk, false},
                     {"k", k, l.k, Dk, false},
                     {"v", v, l.v, Dv, false},
                     {"d_o", d_o, l.d_o, Dv, false},
                     {"dq", dq, l.dq, Dk, true},
                     {"dk", dk, l.dk, Dk, true},
                     {"dv", dv, l.dv, Dv, true}});
}

}  // namespace fsattn
