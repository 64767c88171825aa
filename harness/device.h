// The harness on a GPU, for the GPU suite, the benchmark and the tuner: a CUDA context on the
// calling thread, device copies of host tensors, and the cases of cases.h run through the
// CUDA entry points (inputs uploaded, outputs poisoned with NaN on the device, results
// downloaded), returning the same result structs as the CPU runners so the same checks apply.
#pragma once

#include "cases.h"
#include "cuda_driver.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

namespace fsattn::test {

// Where a failed driver call is reported: by default to stderr, ending the program; the GPU
// suite makes it a test failure.
inline void exit_on_failure(const std::string &what) {
  std::fprintf(stderr, "fsattn harness: %s\n", what.c_str());
  std::exit(1);
}
inline void (*device_failure)(const std::string &what) = exit_on_failure;

inline void check_driver(cu::Result result, const char *call) {
  if (result != cu::kSuccess)
    device_failure(std::string(call) + " failed with CUDA error " + std::to_string(int(result)));
}

// The driver with device 0's primary context current on this thread (as the CUDA runtime
// API would make it), or NULL when there is no GPU (`why` says so).
inline const cu::Driver *gpu(std::string *why = nullptr) {
  const cu::Driver *d = cu::driver(why);
  if (d == nullptr) return nullptr;
  thread_local bool current = false;
  if (!current) {
    cu::Device dev = 0;
    cu::Context ctx = nullptr;
    if (d->DeviceGet(&dev, 0) != cu::kSuccess || d->DevicePrimaryCtxRetain(&ctx, dev) != cu::kSuccess ||
        d->CtxSetCurrent(ctx) != cu::kSuccess) {
      if (why != nullptr) *why = "device 0's primary context could not be made current";
      return nullptr;
    }
    current = true;
  }
  return d;
}

// Device memory holding a copy of host floats; freed with the object.
class DeviceTensor {
 public:
  DeviceTensor() = default;
  explicit DeviceTensor(const std::vector<float> &host) : n_(host.size()) {
    if (n_ == 0) return;
    const cu::Driver *d = gpu();
    check_driver(d->MemAlloc(&p_, n_ * sizeof(float)), "cuMemAlloc");
    check_driver(d->MemcpyHtoD(p_, host.data(), n_ * sizeof(float)), "cuMemcpyHtoD");
  }
  DeviceTensor(const DeviceTensor &) = delete;
  DeviceTensor &operator=(const DeviceTensor &) = delete;
  ~DeviceTensor() {
    if (p_ != 0) gpu()->MemFree(p_);
  }
  float *ptr() const { return n_ == 0 ? nullptr : reinterpret_cast<float *>(uintptr_t(p_)); }
  std::vector<float> download() const {
    std::vector<float> host(n_);
    if (n_ == 0) return host;
    check_driver(gpu()->CtxSynchronize(), "cuCtxSynchronize");
    check_driver(gpu()->MemcpyDtoH(host.data(), p_, n_ * sizeof(float)), "cuMemcpyDtoH");
    return host;
  }

 private:
  cu::DevicePtr p_ = 0;
  size_t n_ = 0;
};

// Device copies that live as long as this object: up(x) uploads, out(n) is n NaNs.
class DeviceArena {
 public:
  float *up(const Tensor32 &x) { return up(x.f); }
  float *up(const std::vector<float> &x) {
    all_.push_back(std::make_unique<DeviceTensor>(x));
    return all_.back()->ptr();
  }
  float *out(size_t n) { return up(std::vector<float>(n, NAN)); }
  // The host values of device memory that up() or out() returned.
  std::vector<float> down(const float *p) const {
    for (const auto &t : all_) {
      if (t->ptr() == p) return t->download();
    }
    device_failure("not a device tensor of this arena");
    return {};
  }

 private:
  std::vector<std::unique_ptr<DeviceTensor>> all_;
};

inline fsattn_exec cuda_exec(void *stream = nullptr, const char *variant = nullptr) {
  return {sizeof(fsattn_exec), FSATTN_DEVICE_CUDA, stream, variant};
}

inline fsattn_ida_params device_params(DeviceArena &a, const IdaCase &c) { return params_in(a, c); }

inline ForwardResult gpu_ida_forward(const IdaCase &c, void *stream = nullptr, const char *variant = nullptr) {
  const auto &s = c.s;
  DeviceArena a;
  const fsattn_ida_params p = device_params(a, c);
  float *o = a.out(s.B * s.T * s.H * s.Dv), *sk = a.out(s.B * s.H * s.M * s.Dk * 2);
  float *sv = a.out(s.B * s.H * s.M * s.Dv * 2);
  const fsattn_exec exec = cuda_exec(stream, variant);
  const fsattn_dims dims = c.dims();
  ForwardResult r;
  r.status = fsattn_ida_forward(&exec, &dims, &p, a.up(c.q), a.up(c.k), a.up(c.v), a.up(c.state_k), a.up(c.state_v), o,
                                sk, sv);
  r.o = a.down(o);
  r.state_k = a.down(sk);
  r.state_v = a.down(sv);
  return r;
}

inline ForwardResult gpu_bla_forward(const BlaCase &c, void *stream = nullptr, const char *variant = nullptr) {
  const auto &s = c.s;
  DeviceArena a;
  fsattn_bla_params p = c.params();
  p.log_gamma = a.up(c.log_gamma);
  float *o = a.out(s.B * s.T * s.H * s.Dv), *sk = a.out(s.B * s.H * s.S * s.Dk), *sv = a.out(s.B * s.H * s.S * s.Dv);
  const fsattn_exec exec = cuda_exec(stream, variant);
  const fsattn_dims dims = c.dims();
  ForwardResult r;
  r.status = fsattn_bla_forward(&exec, &dims, &p, a.up(c.q), a.up(c.k), a.up(c.v), a.up(c.state_k), a.up(c.state_v), o,
                                sk, sv);
  r.o = a.down(o);
  r.state_k = a.down(sk);
  r.state_v = a.down(sv);
  return r;
}

inline IdaGradResult gpu_ida_backward(const IdaCase &c, const IdaUpstream &u, const char *variant = nullptr) {
  const auto &s = c.s;
  DeviceArena a;
  const fsattn_ida_params p = device_params(a, c);
  float *dq = a.out(s.B * s.T * s.H * s.Dk), *dk = a.out(s.B * s.T * s.H * s.Dk), *dv = a.out(s.B * s.T * s.H * s.Dv);
  const fsattn_ida_grads g{sizeof(fsattn_ida_grads),  a.out(s.H * s.Dk), a.out(s.H * s.Dk),
                           a.out(s.H * s.Dv),         a.out(s.H * s.Dv), a.out(s.H),
                           a.out(s.H * s.M),          a.out(s.H * s.M),  a.out(s.H * s.M * 2),
                           a.out(s.H * s.M * s.M * 2)};
  float *dsk = a.out(s.B * s.H * s.M * s.Dk * 2), *dsv = a.out(s.B * s.H * s.M * s.Dv * 2);
  const fsattn_exec exec = cuda_exec(nullptr, variant);
  const fsattn_dims dims = c.dims();
  IdaGradResult r;
  r.status = fsattn_ida_backward(&exec, &dims, &p, a.up(c.q), a.up(c.k), a.up(c.v), a.up(c.state_k), a.up(c.state_v),
                                 a.up(u.d_o), a.up(u.d_state_k), a.up(u.d_state_v), dq, dk, dv, &g, dsk, dsv);
  r.q = a.down(dq);
  r.k = a.down(dk);
  r.v = a.down(dv);
  r.gk = a.down(g.gk);
  r.bk = a.down(g.bk);
  r.gv = a.down(g.gv);
  r.bv = a.down(g.bv);
  r.log_dt = a.down(g.log_dt);
  r.A_re_log = a.down(g.A_re_log);
  r.A_im = a.down(g.A_im);
  r.B = a.down(g.B);
  r.C = a.down(g.C);
  r.state_k = a.down(dsk);
  r.state_v = a.down(dsv);
  return r;
}

inline BlaGradResult gpu_bla_backward(const BlaCase &c, const BlaUpstream &u, const char *variant = nullptr) {
  const auto &s = c.s;
  DeviceArena a;
  fsattn_bla_params p = c.params();
  p.log_gamma = a.up(c.log_gamma);
  float *dq = a.out(s.B * s.T * s.H * s.Dk), *dk = a.out(s.B * s.T * s.H * s.Dk), *dv = a.out(s.B * s.T * s.H * s.Dv);
  float *dlg = a.out(s.H), *dsk = a.out(s.B * s.H * s.S * s.Dk), *dsv = a.out(s.B * s.H * s.S * s.Dv);
  const fsattn_exec exec = cuda_exec(nullptr, variant);
  const fsattn_dims dims = c.dims();
  BlaGradResult r;
  r.status = fsattn_bla_backward(&exec, &dims, &p, a.up(c.q), a.up(c.k), a.up(c.v), a.up(c.state_k), a.up(c.state_v),
                                 a.up(u.d_o), a.up(u.d_state_k), a.up(u.d_state_v), dq, dk, dv, dlg, dsk, dsv);
  r.q = a.down(dq);
  r.k = a.down(dk);
  r.v = a.down(dv);
  r.log_gamma = a.down(dlg);
  r.state_k = a.down(dsk);
  r.state_v = a.down(dsv);
  return r;
}

}  // namespace fsattn::test
