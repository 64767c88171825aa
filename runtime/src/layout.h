// Activation layouts (dims->layout): the element strides of the [B, T, H, D] tensors, with
// zeros made dense, and the checks that keep an output from sharing memory with anything
// else the call reads or writes.
#pragma once

#include "calls.h"
#include "fsattn/fsattn.h"
#include "validate.h"

#include <cstdint>
#include <initializer_list>

namespace fsattn {

struct Strides {
  int64_t batch = 0, token = 0, head = 0;
};

// The strides of every activation of a call, as the caller gave them in dims->layout, each
// zero replaced by its dense value (head D, token H·D, batch T·H·D). Negative strides stay
// as given, for check_activations to refuse.
struct CallLayout {
  explicit CallLayout(const fsattn_dims *dims);
  Strides q, k, v, o, d_o, dq, dk, dv;
};

// One activation of a call, D its feature size (dk or dv).
struct Activation {
  const char *name;
  const void *ptr;
  Strides s;
  int64_t D;
  bool output;
};

// Elements from an activation's pointer to one past its last element.
int64_t span(const Strides &s, int64_t B, int64_t T, int64_t H, int64_t D);

// The Tensor a kernel takes for an activation (dimensions D, H, T, B).
Tensor activation(const float *p, const Strides &s, int64_t D, int64_t H, int64_t T, int64_t B);

// Strides >= 0; token and head strides within Halide's 32-bit dimension strides; each
// tensor's span within the address space; no output whose elements share memory with one
// another or with another activation (exactly decided for two tensors of equal strides, else
// by their address ranges). B and T are the call's (batch 1 and all tokens with cu_seqlens).
void check_activations(Validator &val, int64_t B, int64_t T, int64_t H, std::initializer_list<Activation> list);

// check_activations for a forward pass or a step (q, k, v read; o written) and a backward
// pass (q, k, v, d_o read; dq, dk, dv written), with the call's dims.
void check_forward_activations(Validator &val, const fsattn_dims *dims, const CallLayout &l, const float *q,
                               const float *k, const float *v, const float *o);
void check_backward_activations(Validator &val, const fsattn_dims *dims, const CallLayout &l, const float *q,
                                const float *k, const float *v, const float *d_o, const float *dq, const float *dk,
                                const float *dv);

}  // namespace fsattn
