#include "varlen.h"

#include "kernels.h"
#include "status.h"

#ifdef FSATTN_HAS_CUDA
#include "cuda_call.h"
#include "fsattn_gradient_sum__cuda.h"
#endif

#include <algorithm>
#include <cmath>
#include <string>

namespace fsattn {

namespace {

#ifdef FSATTN_HAS_CUDA
CudaTarget target_of(const VarlenMemory &mem) { return {mem.context, mem.stream}; }

// The gradient_sum kernel (generators/gradient_sum_generator.cpp), called as the table's are.
const Kernel kGradientSum{FSATTN_OP_IDA_BACKWARD,
                          FSATTN_DEVICE_CUDA,
                          "cuda",
                          "hand",
                          0,
                          kDefaultMaxRegisters,
                          fsattn_gradient_sum__cuda_argv,
                          fsattn_gradient_sum__cuda_metadata,
                          "fsattn_gradient_sum__cuda"};
#endif

}  // namespace

std::vector<Sequence> sequences(const fsattn_dims *dims) {
  std::vector<Sequence> seqs;
  for (int64_t s = 0; s < dims->num_seqs; ++s) {
    seqs.push_back({s, dims->cu_seqlens[s], dims->cu_seqlens[s + 1] - dims->cu_seqlens[s]});
  }
  return seqs;
}

fsattn_dims sequence_dims(const fsattn_dims *dims, int64_t len) {
  fsattn_dims d = *dims;  // every other field as the call's
  d.batch = 1, d.seqlen = len, d.cu_seqlens = nullptr, d.num_seqs = 0;
  return d;
}

VarlenSizes::VarlenSizes(const fsattn_dims *dims, const CallLayout &l, size_t nk_, size_t nv_)
    : N(size_t(dims->num_seqs)), nk(nk_), nv(nv_) {
  const int64_t T = dims->seqlen, H = dims->heads, Dk = dims->dk, Dv = dims->dv;
  q = size_t(span(l.q, 1, T, H, Dk)), k = size_t(span(l.k, 1, T, H, Dk)), v = size_t(span(l.v, 1, T, H, Dv));
  o = size_t(span(l.o, 1, T, H, Dv)), d_o = size_t(span(l.d_o, 1, T, H, Dv));
  dq = size_t(span(l.dq, 1, T, H, Dk)), dk = size_t(span(l.dk, 1, T, H, Dk)), dv = size_t(span(l.dv, 1, T, H, Dv));
}

namespace {
// What both passes read: the tokens and the initial states.
std::vector<VarlenBuffer> input_buffers(const VarlenSizes &z, const float *q, const float *k, const float *v,
                                        const float *state_k_in, const float *state_v_in) {
  return {{"q", q, z.q},
          {"k", k, z.k},
          {"v", v, z.v},
          {"state_k_in", state_k_in, z.N * z.nk},
          {"state_v_in", state_v_in, z.N * z.nv}};
}
}  // namespace

std::vector<VarlenBuffer> forward_buffers(const VarlenSizes &z, const float *q, const float *k, const float *v,
                                          const float *state_k_in, const float *state_v_in, const float *o,
                                          const float *state_k_out, const float *state_v_out) {
  std::vector<VarlenBuffer> b = input_buffers(z, q, k, v, state_k_in, state_v_in);
  b.insert(b.end(),
           {{"o", o, z.o}, {"state_k_out", state_k_out, z.N * z.nk}, {"state_v_out", state_v_out, z.N * z.nv}});
  return b;
}

std::vector<VarlenBuffer> backward_buffers(const VarlenSizes &z, const float *q, const float *k, const float *v,
                                           const float *state_k_in, const float *state_v_in, const float *d_o,
                                           const float *d_state_k_out, const float *d_state_v_out, const float *dq,
                                           const float *dk, const float *dv, const float *d_state_k_in,
                                           const float *d_state_v_in) {
  std::vector<VarlenBuffer> b = input_buffers(z, q, k, v, state_k_in, state_v_in);
  const size_t sk = z.N * z.nk, sv = z.N * z.nv;
  b.insert(b.end(), {{"d_o", d_o, z.d_o},
                     {"d_state_k_out", d_state_k_out, sk},
                     {"d_state_v_out", d_state_v_out, sv},
                     {"dq", dq, z.dq},
                     {"dk", dk, z.dk},
                     {"dv", dv, z.dv},
                     {"d_state_k_in", d_state_k_in, sk},
                     {"d_state_v_in", d_state_v_in, sv}});
  return b;
}

fsattn_status varlen_memory(const char *function, const fsattn_exec *exec, const std::vector<VarlenBuffer> &buffers,
                            VarlenMemory *mem) {
  mem->exec = exec;
  if (exec->device != FSATTN_DEVICE_CUDA) return FSATTN_OK;
#ifdef FSATTN_HAS_CUDA
  CudaTarget t;
  if (const fsattn_status st = cuda_target(function, exec->stream, &t); st != FSATTN_OK) return st;
  std::vector<DeviceRange> ranges;
  for (const VarlenBuffer &b : buffers) {
    if (b.ptr != nullptr) ranges.push_back({b.name, b.ptr, b.floats * sizeof(float)});
  }
  if (const fsattn_status st = check_device_memory(t, function, ranges); st != FSATTN_OK) return st;
  mem->cuda = true;
  mem->context = t.context;
  mem->stream = t.stream;
  return FSATTN_OK;
#else
  (void)buffers;
  return fail(FSATTN_ERROR_UNSUPPORTED, std::string(function) + ": this build has no CUDA kernels");
#endif
}

const float *stable_input(const VarlenMemory &mem, const float *in, const float *out, size_t total,
                          std::vector<float> &copy) {
  if (mem.cuda || in == nullptr || out == nullptr || !(in < out + total && out < in + total)) return in;
  copy.assign(in, in + total);
  return copy.data();
}

void pass_through(const VarlenMemory &mem, float *out, const float *in, size_t n) {
  if (out == nullptr || out == in) return;
#ifdef FSATTN_HAS_CUDA
  if (mem.cuda) {
    if (in != nullptr) {
      copy_device(target_of(mem), out, in, n);
    } else {
      zero_device(target_of(mem), out, n);
    }
    return;
  }
#endif
  if (in != nullptr) {
    std::copy(in, in + n, out);
  } else {
    std::fill(out, out + n, 0.0f);
  }
}

void poison(const VarlenMemory &mem, float *out, size_t n, const float *restore) {
  if (out == nullptr) return;
#ifdef FSATTN_HAS_CUDA
  if (mem.cuda) {
    fill_nan(target_of(mem), out, n);
    return;
  }
#endif
  if (restore != nullptr) {
    std::copy(restore, restore + n, out);
  } else {
    std::fill(out, out + n, NAN);
  }
}

void poison(const VarlenMemory &mem, const Tensor &out) {
#ifdef FSATTN_HAS_CUDA
  if (mem.cuda) {
    fill_nan(target_of(mem), out);
    return;
  }
#endif
  (void)mem;
  out.overwrite(nullptr);
}

SummedGradient::~SummedGradient() {
#ifdef FSATTN_HAS_CUDA
  if (mem_.cuda) free_device_scratch(target_of(mem_), part_, n_);
#endif
}

fsattn_status SummedGradient::prepare(const char *function) {
  if (out_ == nullptr || part_ != nullptr) return FSATTN_OK;
#ifdef FSATTN_HAS_CUDA
  if (mem_.cuda) return device_scratch(target_of(mem_), function, n_, &part_);
#endif
  (void)function;
  host_part_.assign(n_, 0.0f);
  total_.assign(n_, 0.0);
  part_ = host_part_.data();
  return FSATTN_OK;
}

fsattn_status SummedGradient::add(const char *function) {
  if (out_ == nullptr) return FSATTN_OK;
  ++added_;
#ifdef FSATTN_HAS_CUDA
  if (mem_.cuda) {
    // The first part is the sum so far; each later one is added to it, in order, on the stream.
    if (added_ == 1) {
      copy_device(target_of(mem_), out_, part_, n_);
      return FSATTN_OK;
    }
    const int64_t n = int64_t(n_);
    KernelArgs args;
    args.shared(Tensor(out_, {n})).shared(Tensor(part_, {n})).whole_output(Tensor(out_, {n}));
    const fsattn_status st = args.run(kGradientSum, 1, mem_.exec);
    return st == FSATTN_OK ? st : fail(st, std::string(function) + ": " + fsattn_last_error());
  }
#endif
  (void)function;
  for (size_t i = 0; i < n_; ++i) total_[i] += part_[i];
  return FSATTN_OK;
}

void SummedGradient::finish() {
  if (out_ == nullptr) return;
#ifdef FSATTN_HAS_CUDA
  if (mem_.cuda) {
    if (added_ == 0) zero_device(target_of(mem_), out_, n_);
    return;
  }
#endif
  for (size_t i = 0; i < n_; ++i) out_[i] = float(total_[i]);
}

}  // namespace fsattn
