// Calling an AOT Halide kernel: dense buffers over caller memory, errors as statuses.
#pragma once

#include "fsattn/fsattn.h"

#include <HalideRuntime.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace fsattn {

// A halide_buffer_t over caller-owned float memory, dims given innermost first: dense, or
// with the given element strides (the innermost 1).
class Tensor {
 public:
  static constexpr int kMaxDims = 5;
  Tensor() = default;
  Tensor(const float *data, std::initializer_list<int64_t> extents);
  Tensor(const float *data, std::initializer_list<int64_t> extents, std::initializer_list<int64_t> strides);
  static Tensor float64(const double *data, std::initializer_list<int64_t> extents);
  // The scalar zero, readable at any index through the kernels' clamped reads (a NULL
  // initial state), or writable as a one-element sink (a NULL final state).
  static Tensor scalar_sink(int dims);
  static Tensor zero(int dims);

  // Overwrites every element (a sink is left alone): with `values` (dense, in index
  // order), or NaN when NULL. Memory between strided elements is not touched.
  void overwrite(const float *values) const;
  int64_t elements() const;
  bool is_sink() const { return sink_; }
  bool is_zero() const;  // the shared zero of Tensor::zero
  const void *data() const { return data_; }
  // From data() to one past the last element.
  size_t bytes() const { return size_t(span()) * (type_.bits / 8); }
  int64_t span() const;
  // The elements as `count` rows of `width` contiguous elements, `pitch` apart, repeated at
  // `outer` offsets (dimensions merged where the strides allow: one row set when dense).
  struct Rows {
    int64_t width, pitch, count;
    std::vector<int64_t> outer;
  };
  Rows rows() const;
  // The same shape over other memory.
  Tensor with_data(float *data) const;

  // Restrict the outermost dimension to [first, first + count) (a batch slice).
  Tensor slice_outer(int64_t first, int64_t count) const;
  int64_t outer_stride() const { return strides_[dims_ - 1]; }
  // The buffer, bound to this object's own dimension array (valid until it moves).
  halide_buffer_t *raw() {
    bind();
    return &buf_;
  }

 private:
  void bind();
  halide_buffer_t buf_{};
  std::array<halide_dimension_t, kMaxDims> dim_{};
  std::array<int64_t, kMaxDims> strides_{};  // 64-bit: the outermost may exceed int32
  std::array<int64_t, kMaxDims> extents_{};
  void *data_ = nullptr;
  halide_type_t type_ = halide_type_t(halide_type_float, 32, 1);
  int dims_ = 0;
  bool sink_ = false;
};

#ifdef FSATTN_HAS_CUDA
struct CudaTarget;
// Fills each element of a device tensor with NaN on t's stream (the outputs of a failed call).
void fill_nan(const CudaTarget &t, const Tensor &tensor);
#endif

// An initial state (NULL: zero). On the CPU, when it overlaps the final state `out` (n
// elements each), it is first copied into `copy`: kernels write the final state while chunks
// still read the initial one. CUDA kernels compute every stage into its own buffer, a
// kernel at a time on one stream, and write a final state only after the last read of its
// initial state (the scan that reads it comes first): they take it in place.
Tensor state_input(fsattn_device device, const float *in, const float *out, std::initializer_list<int64_t> extents,
                   std::vector<float> &copy);
// The copy state_input made of an initial state, or NULL when it made none.
inline const float *restore_of(const std::vector<float> &copy) { return copy.empty() ? nullptr : copy.data(); }
// An initial-state gradient written over its final-state gradient (`seed` copied) or over
// its initial state (`state` copied): the memory to restore if the call fails.
inline const float *restore_of(const std::vector<float> &seed, const std::vector<float> &state) {
  return seed.empty() ? restore_of(state) : restore_of(seed);
}
// A final state (NULL: a sink that is written and never read).
Tensor state_output(float *out, std::initializer_list<int64_t> extents);

// While a CheckOnly lives on this thread, KernelArgs::run makes every check it makes before a
// launch and returns without running the kernel: a variable-length call checks each of its
// sequences' calls this way first, so that one refused comes before any output is written.
class CheckOnly {
 public:
  CheckOnly();
  ~CheckOnly();
  CheckOnly(const CheckOnly &) = delete;
  CheckOnly &operator=(const CheckOnly &) = delete;
  static bool active();

 private:
  bool was_;
};

// The arguments of one kernel call, in the generator's order, and the call itself.
class KernelArgs {
 public:
  KernelArgs &batched(const Tensor &t);  // outermost dimension is the batch
  KernelArgs &shared(const Tensor &t);   // the same for every batch element (parameters)
  KernelArgs &scalar(const void *p);     // an Input<T> scalar: pointer to its value
  // An output (outermost dimension the batch). If the kernel fails, it is filled with NaN,
  // or, when `restore` is given (a final state written in place over its initial state),
  // with the pristine initial values it points to.
  KernelArgs &output(const Tensor &t, const float *restore = nullptr);
  // An output the kernel sums over the batch (a parameter's gradient). When the batch is
  // split into several calls, each call's sum goes to a scratch buffer and the sums are
  // added up here, in double, in batch order.
  KernelArgs &summed(const Tensor &t);
  // An output the batch does not split (its outermost dimension is not the batch).
  KernelArgs &whole_output(const Tensor &t);
  // An output over the memory of an input (a state a step updates in place): the kernel
  // reads each element before it writes it. Left as it is if the kernel fails.
  KernelArgs &in_place(const Tensor &t);

  // Runs `k` over `batch` elements: in one call when every batch stride fits Halide's 32-bit
  // dimension stride, else one element per call (CPU only). Halide errors become a status
  // with Halide's message (kernels are compiled with user_context, so a message reaches its
  // own call even from Halide's worker threads). A CUDA kernel runs on exec->stream in the
  // calling thread's context over the caller's device memory (each pointer checked first),
  // asynchronously: the call returns once its work is queued.
  fsattn_status run(const struct Kernel &k, int64_t batch, const fsattn_exec *exec);

 private:
  struct Entry {
    Tensor tensor;
    const void *scalar = nullptr;
    bool is_batched = false;
    bool is_output = false;
    const float *restore = nullptr;
    bool is_summed = false;
  };
  void poison_outputs(const void *cuda_target);
  std::vector<Entry> entries_;
};

}  // namespace fsattn
