#include "calls.h"

#include "kernels.h"
#include "status.h"
#include "workspace.h"

#ifdef FSATTN_HAS_CUDA
#include "cuda_call.h"

#include <HalideRuntimeCuda.h>
#endif

#include <algorithm>
#include <limits>
#include <mutex>
#include <string>

namespace fsattn {

namespace {

// Every kernel is compiled with the user_context feature: Halide hands the context of the
// failing call to the handlers, also from its worker threads, so messages reach the right
// caller. Halide's default handler would print and abort the host process.
struct CallContext {
  std::string message;
#ifdef FSATTN_HAS_CUDA
  CudaTarget cuda;  // where a CUDA kernel runs
#endif
};

void on_error(void *user_context, const char *msg) {
  if (user_context != nullptr) static_cast<CallContext *>(user_context)->message += msg;
}
void on_print(void *, const char *) {}

void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    halide_set_error_handler(on_error);
    halide_set_custom_print(on_print);
    halide_set_custom_malloc(workspace_malloc);
    halide_set_custom_free(workspace_free);
#ifdef FSATTN_HAS_CUDA
    install_cuda_hooks([](void *uc) { return &static_cast<CallContext *>(uc)->cuda; });
#endif
  });
}

float zero_value = 0.0f;
thread_local float sink_value = 0.0f;  // per thread: concurrent calls never share it

}  // namespace

Tensor::Tensor(const float *data, std::initializer_list<int64_t> extents)
    : data_(const_cast<float *>(data)), dims_(int(extents.size())) {
  int64_t stride = 1;
  int d = 0;
  for (int64_t e : extents) {
    extents_[d] = e;
    strides_[d] = stride;
    stride *= e;
    ++d;
  }
}

Tensor::Tensor(const float *data, std::initializer_list<int64_t> extents, std::initializer_list<int64_t> strides)
    : Tensor(data, extents) {
  int d = 0;
  for (int64_t s : strides) strides_[d++] = s;
}

Tensor Tensor::float64(const double *data, std::initializer_list<int64_t> extents) {
  Tensor t(nullptr, extents);
  t.data_ = const_cast<double *>(data);
  t.type_ = halide_type_t(halide_type_float, 64, 1);
  return t;
}

Tensor Tensor::zero(int dims) {
  Tensor t;
  t.data_ = &zero_value;
  t.dims_ = dims;
  for (int d = 0; d < dims; ++d) t.extents_[d] = 1, t.strides_[d] = 1;
  return t;
}

Tensor Tensor::scalar_sink(int dims) {
  Tensor t = zero(dims);
  t.data_ = &sink_value;  // written by the kernel, never read
  t.sink_ = true;
  return t;
}

void Tensor::overwrite(const float *values) const {
  if (sink_ || data_ == &zero_value) return;
  float *p = static_cast<float *>(data_);
  const Rows r = rows();
  for (int64_t outer : r.outer) {
    for (int64_t i = 0; i < r.count; ++i) {
      float *row = p + outer + i * r.pitch;
      if (values != nullptr) {
        std::copy(values, values + r.width, row);
        values += r.width;
      } else {
        std::fill(row, row + r.width, std::numeric_limits<float>::quiet_NaN());
      }
    }
  }
}

int64_t Tensor::span() const {
  int64_t last = 0;
  for (int d = 0; d < dims_; ++d) last += (extents_[d] - 1) * strides_[d];
  return last + 1;
}

Tensor::Rows Tensor::rows() const {
  // Dimensions merged innermost first wherever one steps exactly over the one inside it.
  std::vector<std::pair<int64_t, int64_t>> dims;  // (extent, stride)
  for (int d = 0; d < dims_; ++d) {
    if (extents_[d] == 1) continue;
    if (!dims.empty() && dims.back().second * dims.back().first == strides_[d]) {
      dims.back().first *= extents_[d];
    } else {
      dims.push_back({extents_[d], strides_[d]});
    }
  }
  Rows r{1, 1, 1, {0}};
  if (dims.empty()) return r;
  r.width = dims[0].first;  // the innermost stride is 1
  if (dims.size() > 1) r.count = dims[1].first, r.pitch = dims[1].second;
  for (size_t d = 2; d < dims.size(); ++d) {
    std::vector<int64_t> next;
    next.reserve(r.outer.size() * size_t(dims[d].first));
    for (int64_t i = 0; i < dims[d].first; ++i) {
      for (int64_t o : r.outer) next.push_back(o + i * dims[d].second);
    }
    r.outer.swap(next);
  }
  return r;
}

bool Tensor::is_zero() const { return data_ == &zero_value; }

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int d = 0; d < dims_; ++d) n *= extents_[d];
  return n;
}

Tensor Tensor::with_data(float *data) const {
  Tensor t = *this;
  t.data_ = data;
  t.sink_ = false;
  return t;
}

Tensor Tensor::slice_outer(int64_t first, int64_t count) const {
  if (sink_ || extents_[dims_ - 1] == 1) return *this;
  Tensor t = *this;
  t.data_ = static_cast<uint8_t *>(data_) + first * strides_[dims_ - 1] * (type_.bits / 8);
  t.extents_[dims_ - 1] = count;
  return t;
}

void Tensor::bind() {
  buf_ = halide_buffer_t{};
  buf_.host = reinterpret_cast<uint8_t *>(data_);
  buf_.type = type_;
  buf_.dimensions = dims_;
  buf_.dim = dim_.data();
  for (int d = 0; d < dims_; ++d) {
    // A dimension of extent 1 is never stepped over: when its dense stride does not fit the
    // 32-bit halide_dimension_t (a batch slice of a huge tensor), any value will do.
    int64_t stride = strides_[d] <= std::numeric_limits<int32_t>::max() ? strides_[d] : 0;
    dim_[d] = halide_dimension_t(0, int32_t(extents_[d]), int32_t(stride));
  }
}

#ifdef FSATTN_HAS_CUDA
void fill_nan(const CudaTarget &t, const Tensor &tensor) {
  const Tensor::Rows r = tensor.rows();
  float *p = static_cast<float *>(const_cast<void *>(tensor.data()));
  for (int64_t outer : r.outer) fill_nan(t, p + outer, size_t(r.width), size_t(r.pitch), size_t(r.count));
}
#endif

Tensor state_input(fsattn_device device, const float *in, const float *out, std::initializer_list<int64_t> extents,
                   std::vector<float> &copy) {
  if (in == nullptr) return Tensor::zero(int(extents.size()));
  if (device == FSATTN_DEVICE_CUDA) return Tensor(in, extents);
  size_t n = 1;
  for (int64_t e : extents) n *= size_t(e);
  if (out != nullptr && in < out + n && out < in + n) {
    copy.assign(in, in + n);
    in = copy.data();
  }
  return Tensor(in, extents);
}

Tensor state_output(float *out, std::initializer_list<int64_t> extents) {
  return out ? Tensor(out, extents) : Tensor::scalar_sink(int(extents.size()));
}

KernelArgs &KernelArgs::batched(const Tensor &t) {
  entries_.push_back({t, nullptr, true});
  return *this;
}
KernelArgs &KernelArgs::shared(const Tensor &t) {
  entries_.push_back({t, nullptr, false});
  return *this;
}
KernelArgs &KernelArgs::scalar(const void *p) {
  entries_.push_back({Tensor(), p, false});
  return *this;
}
KernelArgs &KernelArgs::output(const Tensor &t, const float *restore) {
  entries_.push_back({t, nullptr, true, true, restore});
  return *this;
}

KernelArgs &KernelArgs::whole_output(const Tensor &t) {
  entries_.push_back({t, nullptr, false, true});
  return *this;
}

KernelArgs &KernelArgs::in_place(const Tensor &t) {
  entries_.push_back({t, nullptr, true, false});
  return *this;
}

KernelArgs &KernelArgs::summed(const Tensor &t) {
  Entry e{t, nullptr, false, true};
  e.is_summed = true;
  entries_.push_back(e);
  return *this;
}

void KernelArgs::poison_outputs(const void *cuda_target) {
  for (Entry &e : entries_) {
    if (!e.is_output) continue;
#ifdef FSATTN_HAS_CUDA
    if (cuda_target != nullptr) {
      if (!e.tensor.is_sink()) fill_nan(*static_cast<const CudaTarget *>(cuda_target), e.tensor);
      continue;
    }
#endif
    (void)cuda_target;
    e.tensor.overwrite(e.restore);
  }
}

namespace {
// The name of argument `a` of a kernel that takes `count` arguments besides its user_context.
const char *argument_name(const Kernel &k, size_t a, size_t count) {
  const halide_filter_metadata_t *md = k.metadata();
  const size_t first = size_t(md->num_arguments) - count;
  return a + first < size_t(md->num_arguments) ? md->arguments[a + first].name : "an argument";
}
}  // namespace

namespace {
thread_local bool check_only = false;
}  // namespace

CheckOnly::CheckOnly() : was_(check_only) { check_only = true; }
CheckOnly::~CheckOnly() { check_only = was_; }
bool CheckOnly::active() { return check_only; }

fsattn_status KernelArgs::run(const Kernel &k, int64_t batch, const fsattn_exec *exec) {
  install_handlers();
  bool fits = true;
  for (const Entry &e : entries_) {
    if (e.is_batched && e.tensor.outer_stride() > std::numeric_limits<int32_t>::max()) fits = false;
  }
  const int64_t group = fits ? batch : 1;
  const bool cuda = k.device == FSATTN_DEVICE_CUDA;
#ifdef FSATTN_HAS_CUDA
  CudaTarget target;
  void *device_zero = nullptr, *device_sink = nullptr;
  if (cuda) {
    if (!fits) {
      return fail(FSATTN_ERROR_UNSUPPORTED, std::string(k.name) +
                                                ": on CUDA, one batch element of a tensor may hold at most 2^31 - 1 "
                                                "elements");
    }
    fsattn_status st = cuda_target(k.name, exec->stream, &target);
    target.max_registers = k.registers;
    if (st == FSATTN_OK) st = device_scalars(target, k.name, &device_zero, &device_sink);
    std::vector<DeviceRange> ranges;
    for (size_t a = 0; a < entries_.size(); ++a) {
      const Tensor &t = entries_[a].tensor;
      if (entries_[a].scalar != nullptr || t.is_zero() || t.is_sink()) continue;
      ranges.push_back({argument_name(k, a, entries_.size()), t.data(), size_t(t.bytes())});
    }
    if (st == FSATTN_OK) st = check_device_memory(target, k.name, ranges);
    if (st != FSATTN_OK) return st;
  }
#else
  (void)exec;
  if (cuda) return fail(FSATTN_ERROR_INTERNAL, std::string(k.name) + ": this build has no CUDA runtime");
#endif
  if (check_only) return FSATTN_OK;
  // Batch-summed outputs of a split batch: each call writes a scratch buffer, added up here.
  struct Sum {
    size_t entry;
    std::vector<float> scratch;
    std::vector<double> total;
  };
  std::vector<Sum> sums;
  if (group < batch) {
    for (size_t a = 0; a < entries_.size(); ++a) {
      const Entry &e = entries_[a];
      if (!e.is_summed || e.tensor.is_sink()) continue;
      const size_t n = size_t(e.tensor.elements());
      sums.push_back({a, std::vector<float>(n), std::vector<double>(n, 0.0)});
    }
  }
  for (int64_t first = 0; first < batch; first += group) {
    std::vector<Tensor> slices;
    slices.reserve(entries_.size());
    std::vector<void *> args(entries_.size() + 1);
    CallContext ctx;
#ifdef FSATTN_HAS_CUDA
    ctx.cuda = target;
    std::vector<halide_buffer_t *> wrapped;
#endif
    void *uc = &ctx;
    args[0] = &uc;
    for (size_t a = 0; a < entries_.size(); ++a) {
      const Entry &e = entries_[a];
      if (e.scalar != nullptr) {
        args[a + 1] = const_cast<void *>(e.scalar);
        continue;
      }
      slices.push_back(e.is_batched ? e.tensor.slice_outer(first, group) : e.tensor);
      for (Sum &sum : sums) {
        if (sum.entry == a) slices.back() = e.tensor.with_data(sum.scratch.data());
      }
      halide_buffer_t *buf = slices.back().raw();
      args[a + 1] = buf;
#ifdef FSATTN_HAS_CUDA
      if (cuda) {
        const Tensor &t = slices.back();
        void *device = t.is_zero() ? device_zero : t.is_sink() ? device_sink : const_cast<void *>(t.data());
        buf->host = nullptr;
        if (halide_cuda_wrap_device_ptr(uc, buf, uint64_t(reinterpret_cast<uintptr_t>(device))) != 0) {
          for (halide_buffer_t *w : wrapped) halide_cuda_detach_device_ptr(uc, w);
          return fail(FSATTN_ERROR_INTERNAL, std::string(k.name) + ": could not wrap a device pointer");
        }
        wrapped.push_back(buf);
      }
#endif
    }
    int rc = k.argv(args.data());
#ifdef FSATTN_HAS_CUDA
    for (halide_buffer_t *w : wrapped) halide_cuda_detach_device_ptr(uc, w);
#endif
    if (rc == halide_error_code_success) {
      for (Sum &sum : sums) {
        for (size_t i = 0; i < sum.total.size(); ++i) sum.total[i] += sum.scratch[i];
      }
      continue;
    }
    std::string msg = std::string(k.name) + ": " + (ctx.message.empty() ? "Halide error" : ctx.message);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    msg += " (Halide error code " + std::to_string(rc) + ")";
#ifdef FSATTN_HAS_CUDA
    poison_outputs(cuda ? &target : nullptr);
#else
    poison_outputs(nullptr);
#endif
    if (rc == halide_error_code_out_of_memory || rc == halide_error_code_device_malloc_failed) {
      return fail(FSATTN_ERROR_OUT_OF_MEMORY, msg);
    }
    return fail(cuda ? FSATTN_ERROR_DEVICE : FSATTN_ERROR_INTERNAL, msg);
  }
  for (Sum &sum : sums) {
    std::vector<float> values(sum.total.begin(), sum.total.end());
    entries_[sum.entry].tensor.overwrite(values.data());
  }
  return FSATTN_OK;
}

}  // namespace fsattn
