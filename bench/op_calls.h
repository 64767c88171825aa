// One call of one op, its inputs made and its outputs allocated on the CPU or the GPU, ready
// to run again and again: what fsattn-bench and fsattn-tune time. Every op is described by
// the same shape (batch, seqlen, heads, dk, dv, and the features: IDA modes, BLA slots; BLA
// takes M = (S - 1) / 2 Fourier modes and W = 256, as in docs/performance.md).
#pragma once

#include "cases.h"

#ifdef FSATTN_BENCH_CUDA
#include "device.h"
#endif

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace fsattn::bench {

struct OpShape {
  int64_t batch, seqlen, heads, dk, dv, features;
};

// Where a prepared call's tensors live: host vectors, or (CUDA) device copies.
class Memory {
 public:
  explicit Memory(fsattn_device device) : device_(device) {}
  float *up(const test::Tensor32 &x) { return up(x.f); }
  float *up(const std::vector<float> &x) {
#ifdef FSATTN_BENCH_CUDA
    if (device_ == FSATTN_DEVICE_CUDA) return x.empty() ? nullptr : gpu_.up(x);
#endif
    host_.push_back(std::make_unique<std::vector<float>>(x));
    return host_.back()->empty() ? nullptr : host_.back()->data();
  }
  float *out(size_t n) { return up(std::vector<float>(n, 0.0f)); }

 private:
  fsattn_device device_;
  std::vector<std::unique_ptr<std::vector<float>>> host_;
#ifdef FSATTN_BENCH_CUDA
  test::DeviceArena gpu_;
#endif
};

struct PreparedCall {
  explicit PreparedCall(fsattn_device device) : memory(device) {}
  Memory memory;
  std::function<fsattn_status()> run;  // one call of the op
};

inline ref::IdaShape ida_shape(const OpShape &s) { return {s.batch, s.seqlen, s.heads, s.dk, s.dv, s.features}; }
inline ref::BlaShape bla_shape(const OpShape &s) {
  return {s.batch, s.seqlen, s.heads, s.dk, s.dv, (s.features - 1) / 2, 256.0, s.features};
}

// The op's call at shape s on `device`, running `variant` (NULL: the tuning table's pick) on
// `stream`. Forward passes write their final states; backward passes write every gradient;
// steps update their states in place (their seqlen is 1).
inline std::unique_ptr<PreparedCall> prepare(fsattn_op op, fsattn_device device, const char *variant, OpShape s,
                                             void *stream = nullptr) {
  auto call = std::make_unique<PreparedCall>(device);
  Memory &m = call->memory;
  const fsattn_exec exec{sizeof(fsattn_exec), device, stream, variant};
  const bool step = op == FSATTN_OP_IDA_STEP || op == FSATTN_OP_BLA_STEP;
  if (step) s.seqlen = 1;
  const size_t tokens = size_t(s.batch * s.seqlen * s.heads);
  if (op == FSATTN_OP_IDA_FORWARD || op == FSATTN_OP_IDA_BACKWARD || op == FSATTN_OP_IDA_STEP) {
    const test::IdaCase c = test::make_ida_case(ida_shape(s), 42, step);
    const test::IdaUpstream u = test::make_ida_upstream(c, 43, false);
    const fsattn_dims dims = c.dims();
    const fsattn_ida_params p = test::params_in(m, c);
    const float *q = m.up(c.q), *k = m.up(c.k), *v = m.up(c.v);
    const size_t nk = size_t(s.batch * s.heads * s.features * s.dk * 2),
                 nv = size_t(s.batch * s.heads * s.features * s.dv * 2);
    float *o = m.out(tokens * s.dv), *sk = step ? m.up(c.state_k) : m.out(nk), *sv = step ? m.up(c.state_v) : m.out(nv);
    if (op == FSATTN_OP_IDA_FORWARD) {
      call->run = [=] { return fsattn_ida_forward(&exec, &dims, &p, q, k, v, nullptr, nullptr, o, sk, sv); };
    } else if (op == FSATTN_OP_IDA_STEP) {
      call->run = [=] { return fsattn_ida_step(&exec, &dims, &p, q, k, v, sk, sv, o); };
    } else {
      const float *d_o = m.up(u.d_o);
      float *dq = m.out(tokens * s.dk), *dk = m.out(tokens * s.dk), *dv = m.out(tokens * s.dv);
      const int64_t H = s.heads, M = s.features;
      const fsattn_ida_grads g{sizeof(fsattn_ida_grads),
                               m.out(H * s.dk),
                               m.out(H * s.dk),
                               m.out(H * s.dv),
                               m.out(H * s.dv),
                               m.out(H),
                               m.out(H * M),
                               m.out(H * M),
                               m.out(H * M * 2),
                               m.out(H * M * M * 2)};
      call->run = [=] {
        return fsattn_ida_backward(&exec, &dims, &p, q, k, v, nullptr, nullptr, d_o, nullptr, nullptr, dq, dk, dv, &g,
                                   sk, sv);
      };
    }
  } else {
    const test::BlaCase c = test::make_bla_case(bla_shape(s), step ? 1000 : 0, 42, 0.9, step);
    const test::BlaUpstream u = test::make_bla_upstream(c, 43, false);
    const fsattn_dims dims = c.dims();
    fsattn_bla_params p = c.params();
    p.log_gamma = m.up(c.log_gamma);
    const float *q = m.up(c.q), *k = m.up(c.k), *v = m.up(c.v);
    const size_t nk = size_t(s.batch * s.heads * s.features * s.dk), nv = size_t(s.batch * s.heads * s.features * s.dv);
    float *o = m.out(tokens * s.dv), *sk = step ? m.up(c.state_k) : m.out(nk), *sv = step ? m.up(c.state_v) : m.out(nv);
    if (op == FSATTN_OP_BLA_FORWARD) {
      call->run = [=] { return fsattn_bla_forward(&exec, &dims, &p, q, k, v, nullptr, nullptr, o, sk, sv); };
    } else if (op == FSATTN_OP_BLA_STEP) {
      call->run = [=] { return fsattn_bla_step(&exec, &dims, &p, q, k, v, sk, sv, o); };
    } else {
      const float *d_o = m.up(u.d_o);
      float *dq = m.out(tokens * s.dk), *dk = m.out(tokens * s.dk), *dv = m.out(tokens * s.dv), *dlg = m.out(s.heads);
      call->run = [=] {
        return fsattn_bla_backward(&exec, &dims, &p, q, k, v, nullptr, nullptr, d_o, nullptr, nullptr, dq, dk, dv, dlg,
                                   sk, sv);
      };
    }
  }
  return call;
}

// The median of a list of times.
inline double median_of(std::vector<double> t) {
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

// The median time of `runs` calls of run() in ms, after `warmup` untimed ones (module load,
// PTX compilation, workspace). CPU: the steady clock around each call. CUDA: events on the
// default stream around each call (run() must use that stream), each call starting on an idle
// GPU, so that the time includes the host's work before the first kernel starts; *host_ms
// (where given) gets the median time the host spent inside run() itself. On a failed call
// returns a negative time, the status in *status.
inline double median_ms(fsattn_device device, const std::function<fsattn_status()> &run, int runs, int warmup,
                        fsattn_status *status, double *host_ms = nullptr) {
  *status = FSATTN_OK;
  for (int i = 0; i < warmup; ++i) {
    if ((*status = run()) != FSATTN_OK) return -1.0;
  }
  std::vector<double> ms(size_t(std::max(runs, 1)));
#ifdef FSATTN_BENCH_CUDA
  if (device == FSATTN_DEVICE_CUDA) {
    const cu::Driver *d = test::gpu();
    cu::Event start = nullptr, stop = nullptr;
    d->EventCreate(&start, 0);
    d->EventCreate(&stop, 0);
    d->CtxSynchronize();
    std::vector<double> host;
    for (double &t : ms) {
      float elapsed = 0;
      d->EventRecord(start, nullptr);
      const auto host_start = std::chrono::steady_clock::now();
      *status = run();
      host.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_start).count());
      d->EventRecord(stop, nullptr);
      d->EventSynchronize(stop);
      d->EventElapsedTime(&elapsed, start, stop);
      t = elapsed;
      if (*status != FSATTN_OK) break;
    }
    d->EventDestroy(start);
    d->EventDestroy(stop);
    if (*status == FSATTN_OK && d->CtxSynchronize() != cu::kSuccess) *status = FSATTN_ERROR_DEVICE;
    if (host_ms != nullptr && *status == FSATTN_OK) *host_ms = median_of(host);
  } else
#endif
  {
    (void)device;
    for (double &t : ms) {
      const auto start = std::chrono::steady_clock::now();
      *status = run();
      t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (*status != FSATTN_OK) break;
    }
  }
  if (*status != FSATTN_OK) return -1.0;
  return median_of(ms);
}

#ifdef FSATTN_BENCH_CUDA
// The time per call in ms of `calls` calls of run() queued back to back on the default stream,
// between two events, as a decoding loop queues its steps: the host prepares the next call
// while the GPU runs the last one. The median of `runs` such batches.
inline double back_to_back_ms(const std::function<fsattn_status()> &run, int calls, int runs, fsattn_status *status) {
  const cu::Driver *d = test::gpu();
  cu::Event start = nullptr, stop = nullptr;
  d->EventCreate(&start, 0);
  d->EventCreate(&stop, 0);
  std::vector<double> ms;
  *status = FSATTN_OK;
  for (int r = 0; r < runs && *status == FSATTN_OK; ++r) {
    d->CtxSynchronize();
    d->EventRecord(start, nullptr);
    for (int c = 0; c < calls && *status == FSATTN_OK; ++c) *status = run();
    d->EventRecord(stop, nullptr);
    d->EventSynchronize(stop);
    float elapsed = 0;
    d->EventElapsedTime(&elapsed, start, stop);
    ms.push_back(elapsed / calls);
  }
  d->EventDestroy(start);
  d->EventDestroy(stop);
  if (*status == FSATTN_OK && d->CtxSynchronize() != cu::kSuccess) *status = FSATTN_ERROR_DEVICE;
  return *status == FSATTN_OK ? median_of(ms) : -1.0;
}
#endif

}  // namespace fsattn::bench
