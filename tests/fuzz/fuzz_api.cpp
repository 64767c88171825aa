// libFuzzer harness: drives every public function with arbitrary sizes, parameters and
// null/non-null pointers over small real buffers. Build with -DFSATTN_FUZZ=ON and clang (see
// docs/testing.md, Reliability); every finding is a crash, a hang, a sanitizer report or
// a broken contract (a trap below).
//
// Contract checked on every call: the status is a known one; a failure leaves a message; a
// call refused by validation (INVALID_ARGUMENT, UNSUPPORTED) wrote nothing. Sizes outside the
// documented limits must be refused; those are passed one-element buffers, which the library
// must never read. Sizes inside them get buffers of their exact size (small ones only).
//
// With FSATTN_FUZZ_DEVICE=cuda (on a GPU machine, under compute-sanitizer memcheck) every
// pass and step runs on CUDA over device copies of those buffers; one in 32 is passed as a
// host pointer or one element past its allocation's end, and the call must then be refused.
#include "fsattn/fsattn.h"

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#if FSATTN_FUZZ_CUDA
#include "device.h"
#endif

namespace {

#if FSATTN_FUZZ_CUDA
using DeviceCopy = fsattn::test::DeviceTensor;
bool gpu_available(std::string *why) { return fsattn::test::gpu(why) != nullptr; }
#else
// A build without the CUDA kernels has no CUDA mode: a stand-in that is never constructed.
struct DeviceCopy {
  explicit DeviceCopy(const std::vector<float> &) {}
  float *ptr() const { return nullptr; }
  std::vector<float> download() const { return {}; }
};
bool gpu_available(std::string *why) {
  *why = "this build has no CUDA kernels";
  return false;
}
#endif

constexpr int64_t kMaxElements = 1 << 14;  // per buffer: keeps each input fast
constexpr float kSentinel = 1234.5f;

bool g_cuda = false;       // FSATTN_FUZZ_DEVICE=cuda: the calls on CUDA, over device memory
std::string g_bad_detail;  // the bad pointers the call was passed, for the report of a failed check
int g_call = -1;           // which function this input calls (LLVMFuzzerTestOneInput)

// A broken contract: which check, and the library's last message, then a trap (the input
// is the finding).
void check_at(bool ok, int line) {
  if (ok) return;
  std::fprintf(stderr, "fsattn-fuzz: call %d, the check at fuzz_api.cpp:%d failed; last error: %s; bad pointers: %s\n",
               g_call, line, fsattn_last_error(), g_bad_detail.empty() ? "none" : g_bad_detail.c_str());
  __builtin_trap();
}
#define check(ok) check_at((ok), __LINE__)

// A size: usually small and valid, sometimes zero, negative, just past a limit, or huge.
int64_t fuzz_size(FuzzedDataProvider &in, int64_t limit) {
  switch (in.ConsumeIntegralInRange<int>(0, 9)) {
    case 0: return 0;
    case 1: return -in.ConsumeIntegralInRange<int64_t>(1, 3);
    case 2: return limit + 1;
    case 3:
      return in.PickValueInArray<int64_t>({int64_t(1) << 31, int64_t(1) << 40, std::numeric_limits<int64_t>::max()});
    default: return in.ConsumeIntegralInRange<int64_t>(1, 6);
  }
}

float fuzz_float(FuzzedDataProvider &in) {
  switch (in.ConsumeIntegralInRange<int>(0, 12)) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return -INFINITY;
    case 3: return 0.0f;
    case 4: return in.ConsumeFloatingPoint<float>();
    default: return in.ConsumeFloatingPointInRange<float>(-3.0f, 3.0f);
  }
}

double fuzz_double(FuzzedDataProvider &in, double lo, double hi) {
  switch (in.ConsumeIntegralInRange<int>(0, 8)) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return -1.0;
    case 3: return 0.0;
    case 4: return 1e-300;
    case 5: return in.ConsumeFloatingPoint<double>();
    default: return in.ConsumeFloatingPointInRange<double>(lo, hi);
  }
}

bool in_range(int64_t x, int64_t lo, int64_t hi) { return x >= lo && x <= hi; }

// Element count, or -1 when it overflows or exceeds what this harness allocates.
int64_t count(std::initializer_list<int64_t> extents) {
  int64_t n = 1;
  for (int64_t e : extents) {
    if (e < 0 || __builtin_mul_overflow(n, e, &n)) return -1;
  }
  return n > kMaxElements ? -1 : n;
}

// A buffer the library may read: `n` fuzzed values, or one element when the call must be
// refused before reading (n < 0), or NULL when the fuzzer says so. In CUDA mode the values
// live in device memory too, and ptr() is a device pointer (or a bad one, which the call
// must refuse if it is passed: check_call).
struct Buffer {
  std::vector<float> data;
  bool null = false;
  std::shared_ptr<DeviceCopy> device;
  enum { kDevice, kHost, kPastTheEnd } pass = kDevice;
  float *ptr() {
    if (null) return nullptr;
    if (!g_cuda || pass == kHost) return data.data();
    return device->ptr() + (pass == kPastTheEnd ? 1 : 0);
  }
  bool bad() const { return g_cuda && !null && pass != kDevice; }
  // CUDA mode: the device values back into `data` (what the call may have written). The
  // allocation as it is, also under a past-the-end pointer (which a call must refuse):
  // shifted, it would read as written.
  void download() {
    if (g_cuda && pass != kHost) data = device->download();
  }
};
Buffer buffer(FuzzedDataProvider &in, int64_t n, bool fill) {
  Buffer b;
  b.null = in.ConsumeIntegralInRange<int>(0, 15) == 0;
  b.data.assign(n > 0 ? size_t(n) : 1, kSentinel);
  if (fill) {
    for (float &e : b.data) e = fuzz_float(in);
  }
  if (g_cuda) {
    b.device = std::make_shared<DeviceCopy>(b.data);
    const int pass = in.ConsumeIntegralInRange<int>(0, 63);
    if (pass < 2) b.pass = pass == 0 ? Buffer::kHost : Buffer::kPastTheEnd;
  }
  return b;
}
Buffer input(FuzzedDataProvider &in, int64_t n) { return buffer(in, n, true); }
Buffer output(FuzzedDataProvider &in, int64_t n) { return buffer(in, n, false); }
bool bits_equal(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
bool untouched(const Buffer &b) {
  for (float e : b.data)
    if (std::memcmp(&e, &kSentinel, sizeof e) != 0) return false;
  return true;
}

fsattn_exec fuzz_exec(FuzzedDataProvider &in, fsattn_op op) {
  fsattn_exec e{sizeof(fsattn_exec), g_cuda ? FSATTN_DEVICE_CUDA : FSATTN_DEVICE_CPU, nullptr, nullptr};
  switch (in.ConsumeIntegralInRange<int>(0, 10)) {
    case 0: e.device = FSATTN_DEVICE_CUDA; break;
    case 10: e.struct_size = in.ConsumeIntegralInRange<size_t>(0, sizeof(fsattn_exec) - 1); break;  // refused
    case 1: {
      // Any int may arrive from a C caller; stored without forming an out-of-range enum value.
      // (Not the CPU in CUDA mode, whose device pointers the CPU must not be given.)
      int device = in.ConsumeIntegral<int>();
      if (g_cuda && device == FSATTN_DEVICE_CPU) device = FSATTN_DEVICE_CUDA;
      std::memcpy(&e.device, &device, sizeof device);
      break;
    }
    case 2: e.variant = "no_such_variant"; break;
    case 3: {
      int n = fsattn_variant_count(op, e.device);
      if (n > 0) e.variant = fsattn_variant_name(op, e.device, in.ConsumeIntegralInRange<int>(0, n - 1));
      break;
    }
    default: break;
  }
  return e;
}

using Buffers = std::vector<Buffer *>;
Buffers operator+(Buffers a, const Buffers &b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// After a call given the buffers `inputs`, `outputs` and `states` (updated in place): a known
// status, a message on failure, nothing written when refused. A call must be refused when
// it is invalid or when a bad pointer is among those passed (not those of a struct passed as
// NULL). The states are downloaded for the caller to compare.
void check_call(fsattn_status st, bool must_refuse, const Buffers &inputs, const Buffers &outputs,
                const Buffers &states = {}) {
  check(st == FSATTN_OK || st == FSATTN_ERROR_INVALID_ARGUMENT || st == FSATTN_ERROR_UNSUPPORTED ||
        st == FSATTN_ERROR_DEVICE || st == FSATTN_ERROR_INTERNAL || st == FSATTN_ERROR_OUT_OF_MEMORY);
  g_bad_detail.clear();
  const Buffers passed = inputs + outputs + states;
  for (size_t i = 0; i < passed.size(); ++i) {
    if (!passed[i]->bad()) continue;
    g_bad_detail += "buffer " + std::to_string(i) + (passed[i]->pass == Buffer::kHost ? " host, " : " past the end, ") +
                    std::to_string(passed[i]->data.size()) + " floats; ";
  }
  if (must_refuse || !g_bad_detail.empty())
    check(st == FSATTN_ERROR_INVALID_ARGUMENT || st == FSATTN_ERROR_UNSUPPORTED);
  for (Buffer *b : outputs) b->download();
  for (Buffer *b : states) b->download();
  if (st != FSATTN_OK) check(fsattn_last_error()[0] != '\0');
  // A CUDA call without a GPU (DEVICE), or over host memory (INVALID_ARGUMENT), is refused
  // before anything is written, like an invalid one.
  if (st == FSATTN_ERROR_INVALID_ARGUMENT || st == FSATTN_ERROR_UNSUPPORTED || st == FSATTN_ERROR_DEVICE) {
    for (Buffer *b : outputs) check(untouched(*b));
  }
}

struct Dims {
  fsattn_dims d;
  bool valid;                  // valid for the forward and backward passes
  bool refuse_layout = false;  // a layout every call must refuse (its buffers sized as if valid)
  int64_t states;              // the states' batch: d.batch, or num_seqs with cu_seqlens
};
// One in eight calls is a variable-length batch: cu_seqlens consistent or not (its storage
// lives until the next call).
Dims fuzz_dims(FuzzedDataProvider &in) {
  static std::vector<int64_t> cu;
  Dims x;
  x.d = {sizeof(fsattn_dims),
         fuzz_size(in, INT32_MAX),
         fuzz_size(in, INT32_MAX),
         fuzz_size(in, FSATTN_MAX_HEADS),
         fuzz_size(in, FSATTN_MAX_FEATURE),
         fuzz_size(in, FSATTN_MAX_FEATURE),
         nullptr,
         0};
  x.valid = in_range(x.d.batch, 1, INT32_MAX) && in_range(x.d.seqlen, 1, INT32_MAX) &&
            in_range(x.d.heads, 1, FSATTN_MAX_HEADS) && in_range(x.d.dk, 1, FSATTN_MAX_FEATURE) &&
            in_range(x.d.dv, 1, FSATTN_MAX_FEATURE);
  x.states = x.d.batch;
  if (in.ConsumeIntegralInRange<int>(0, 7) == 0) {
    const int64_t n = in.ConsumeIntegralInRange<int64_t>(1, 5);
    cu.assign(size_t(n + 1), 0);
    for (int64_t s = 1; s <= n; ++s) {
      // Mostly a split of [0, seqlen]; sometimes any value.
      cu[s] = in.ConsumeBool() ? in.ConsumeIntegral<int64_t>()
                               : in.ConsumeIntegralInRange<int64_t>(cu[s - 1], std::max(cu[s - 1], x.d.seqlen));
    }
    if (in.ConsumeBool()) cu[n] = x.d.seqlen;
    if (in.ConsumeIntegralInRange<int>(0, 7) == 0) cu[0] = in.ConsumeIntegral<int64_t>();
    bool consistent = x.d.batch == 1 && cu[0] == 0 && cu[n] == x.d.seqlen;
    for (int64_t s = 1; s <= n; ++s) consistent = consistent && cu[s] >= cu[s - 1];
    x.d.cu_seqlens = cu.data();
    x.d.num_seqs = n;
    x.valid = x.valid && consistent;
    x.states = n;
  }
  // One in eight calls has a layout: every stride given its dense value (the call is the
  // dense one), a negative stride for q, k or v, or a struct_size no header declares.
  static fsattn_layout layout;
  switch (in.ConsumeIntegralInRange<int>(0, 23)) {
    case 0: {
      if (!x.valid) break;  // (sizes in range: the dense strides fit)
      const int64_t T = x.d.seqlen, H = x.d.heads, Dk = x.d.dk, Dv = x.d.dv;
      const fsattn_strides k = {T * H * Dk, H * Dk, Dk}, v = {T * H * Dv, H * Dv, Dv};
      layout = {sizeof(fsattn_layout), k, k, v, v, v, k, k, v};
      x.d.layout = &layout;
      break;
    }
    case 1: {
      layout = FSATTN_LAYOUT_INIT;
      fsattn_strides *tensor[3] = {&layout.q, &layout.k, &layout.v};
      fsattn_strides &t = *tensor[in.ConsumeIntegralInRange<int>(0, 2)];
      int64_t *field[3] = {&t.batch, &t.token, &t.head};
      *field[in.ConsumeIntegralInRange<int>(0, 2)] = in.ConsumeIntegralInRange<int64_t>(INT64_MIN, -1);
      x.d.layout = &layout;
      x.refuse_layout = true;
      break;
    }
    case 2:
      layout = FSATTN_LAYOUT_INIT;
      layout.struct_size = in.ConsumeBool() ? in.ConsumeIntegralInRange<size_t>(0, sizeof(fsattn_layout) - 1)
                                            : in.ConsumeIntegralInRange<size_t>(4097, SIZE_MAX);
      x.d.layout = &layout;
      x.refuse_layout = true;
      break;
    default: break;
  }
  return x;
}

// The arguments fsattn_ida_forward and fsattn_ida_backward share, and the buffers they read.
struct IdaCall {
  fsattn_exec exec;
  Dims dm;
  int64_t M;
  bool valid;
  int64_t n, nq, nv, nsk, nsv;    // n: 1, or -1 for a call that must be refused (one-element buffers)
  int64_t nhk, nhv, nhm, nB, nC;  // parameter sizes (-1 past the harness's limit)
  Buffer q, k, v, gk, bk, gv, bv, log_dt, are, aim, Bm, C, sk, sv;
  fsattn_ida_params p;
  bool null_p;
  // What the call reads besides the states: the parameters only when p is passed.
  Buffers inputs() {
    if (null_p) return {&q, &k, &v};
    return {&q, &k, &v, &gk, &bk, &gv, &bv, &log_dt, &are, &aim, &Bm, &C};
  }
};
// NULL when the call is valid but too large to allocate here.
std::unique_ptr<IdaCall> fuzz_ida_call(FuzzedDataProvider &in, fsattn_op op) {
  auto c = std::make_unique<IdaCall>();
  c->exec = fuzz_exec(in, op);
  c->dm = fuzz_dims(in);
  const fsattn_dims &d = c->dm.d;
  const int64_t M = c->M = fuzz_size(in, FSATTN_MAX_FEATURE);
  c->valid = c->dm.valid && in_range(M, 1, FSATTN_MAX_FEATURE);
  c->nq = count({d.batch, d.seqlen, d.heads, d.dk}), c->nv = count({d.batch, d.seqlen, d.heads, d.dv});
  c->nsk = count({c->dm.states, d.heads, M, d.dk, 2}), c->nsv = count({c->dm.states, d.heads, M, d.dv, 2});
  const int64_t nhk = c->nhk = count({d.heads, d.dk}), nhv = c->nhv = count({d.heads, d.dv});
  const int64_t nhm = c->nhm = count({d.heads, M});
  const int64_t nB = c->nB = count({d.heads, M, 2}), nC = c->nC = count({d.heads, M, M, 2});
  const bool small =
      c->nq > 0 && c->nv > 0 && c->nsk > 0 && c->nsv > 0 && nhk > 0 && nhv > 0 && nhm > 0 && nB > 0 && nC > 0;
  if (c->valid && !small) return nullptr;
  const int64_t n = c->n = c->valid ? 1 : -1;
  c->q = input(in, n * c->nq), c->k = input(in, n * c->nq), c->v = input(in, n * c->nv);
  c->gk = input(in, n * nhk), c->bk = input(in, n * nhk), c->gv = input(in, n * nhv), c->bv = input(in, n * nhv);
  c->log_dt = input(in, n * d.heads), c->are = input(in, n * nhm), c->aim = input(in, n * nhm);
  c->Bm = input(in, n * nB), c->C = input(in, n * nC), c->sk = input(in, n * c->nsk), c->sv = input(in, n * c->nsv);
  c->p = {sizeof(fsattn_ida_params),
          M,
          fuzz_float(in),
          c->gk.ptr(),
          c->bk.ptr(),
          c->gv.ptr(),
          c->bv.ptr(),
          c->log_dt.ptr(),
          c->are.ptr(),
          c->aim.ptr(),
          c->Bm.ptr(),
          c->C.ptr()};
  c->null_p = in.ConsumeIntegralInRange<int>(0, 31) == 0;
  return c;
}

void fuzz_ida_forward(FuzzedDataProvider &in) {
  std::unique_ptr<IdaCall> c = fuzz_ida_call(in, FSATTN_OP_IDA_FORWARD);
  if (c == nullptr) return;
  Buffer o = output(in, c->n * c->nv), sko = output(in, c->n * c->nsk), svo = output(in, c->n * c->nsv);
  fsattn_status st = fsattn_ida_forward(&c->exec, &c->dm.d, c->null_p ? nullptr : &c->p, c->q.ptr(), c->k.ptr(),
                                        c->v.ptr(), c->sk.ptr(), c->sv.ptr(), o.ptr(), sko.ptr(), svo.ptr());
  check_call(st, !c->valid || c->dm.refuse_layout, c->inputs() + Buffers{&c->sk, &c->sv}, {&o, &sko, &svo});
}

void fuzz_ida_backward(FuzzedDataProvider &in) {
  std::unique_ptr<IdaCall> c = fuzz_ida_call(in, FSATTN_OP_IDA_BACKWARD);
  if (c == nullptr) return;
  const fsattn_dims &d = c->dm.d;
  const int64_t n = c->n;
  Buffer d_o = input(in, n * c->nv), dsko = input(in, n * c->nsk), dsvo = input(in, n * c->nsv);
  Buffer dq = output(in, n * c->nq), dk = output(in, n * c->nq), dv = output(in, n * c->nv);
  Buffer dgk = output(in, n * c->nhk), dbk = output(in, n * c->nhk);
  Buffer dgv = output(in, n * c->nhv), dbv = output(in, n * c->nhv);
  Buffer dldt = output(in, n * d.heads), dare = output(in, n * c->nhm), daim = output(in, n * c->nhm);
  Buffer dB = output(in, n * c->nB), dC = output(in, n * c->nC);
  Buffer dski = output(in, n * c->nsk), dsvi = output(in, n * c->nsv);
  fsattn_ida_grads dp{sizeof(fsattn_ida_grads),
                      dgk.ptr(),
                      dbk.ptr(),
                      dgv.ptr(),
                      dbv.ptr(),
                      dldt.ptr(),
                      dare.ptr(),
                      daim.ptr(),
                      dB.ptr(),
                      dC.ptr()};
  const bool null_dp = in.ConsumeIntegralInRange<int>(0, 15) == 0;
  fsattn_status st = fsattn_ida_backward(&c->exec, &d, c->null_p ? nullptr : &c->p, c->q.ptr(), c->k.ptr(), c->v.ptr(),
                                         c->sk.ptr(), c->sv.ptr(), d_o.ptr(), dsko.ptr(), dsvo.ptr(), dq.ptr(),
                                         dk.ptr(), dv.ptr(), null_dp ? nullptr : &dp, dski.ptr(), dsvi.ptr());
  const Buffers grads = null_dp ? Buffers{} : Buffers{&dgk, &dbk, &dgv, &dbv, &dldt, &dare, &daim, &dB, &dC};
  check_call(st, !c->valid || c->dm.refuse_layout, c->inputs() + Buffers{&c->sk, &c->sv, &d_o, &dsko, &dsvo},
             Buffers{&dq, &dk, &dv, &dski, &dsvi} + grads);
}

// A step updates its states in place: a refused call must leave them as they were.
void fuzz_ida_step(FuzzedDataProvider &in) {
  std::unique_ptr<IdaCall> c = fuzz_ida_call(in, FSATTN_OP_IDA_STEP);
  if (c == nullptr) return;
  const bool valid = c->valid && c->dm.d.seqlen == 1 && c->dm.d.cu_seqlens == nullptr;
  const std::vector<float> sk0 = c->sk.data, sv0 = c->sv.data;
  Buffer o = output(in, c->n * c->nv);
  fsattn_status st = fsattn_ida_step(&c->exec, &c->dm.d, c->null_p ? nullptr : &c->p, c->q.ptr(), c->k.ptr(),
                                     c->v.ptr(), c->sk.ptr(), c->sv.ptr(), o.ptr());
  check_call(st, !valid || c->dm.refuse_layout, c->inputs(), {&o}, {&c->sk, &c->sv});
  if (st != FSATTN_OK) check(bits_equal(c->sk.data, sk0) && bits_equal(c->sv.data, sv0));
}

// The arguments fsattn_bla_forward and fsattn_bla_backward share, and the sizes they imply.
struct BlaCall {
  fsattn_exec exec;
  Dims dm;
  fsattn_bla_params p{sizeof(fsattn_bla_params)};
  bool valid;
  int64_t nq, nv, nsk, nsv;
  bool small;  // every buffer small enough to allocate here
};
BlaCall fuzz_bla_call(FuzzedDataProvider &in, fsattn_op op) {
  BlaCall c{fuzz_exec(in, op), fuzz_dims(in)};
  const fsattn_dims &d = c.dm.d;
  fsattn_bla_params &p = c.p;
  p.modes = fuzz_size(in, FSATTN_MAX_FEATURE) - 1;
  p.period = fuzz_double(in, 0.5, 100.0);
  p.slots = fuzz_size(in, FSATTN_MAX_FEATURE);
  p.scale = fuzz_float(in);
  p.pos0 = in.ConsumeBool() ? in.ConsumeIntegral<int64_t>() : in.ConsumeIntegralInRange<int64_t>(0, 1000);
  c.valid = c.dm.valid && in_range(p.modes, 0, FSATTN_MAX_FEATURE) && in_range(p.slots, 1, FSATTN_MAX_FEATURE) &&
            std::isfinite(p.period) && p.period >= FSATTN_BLA_MIN_PERIOD;
  c.nq = count({d.batch, d.seqlen, d.heads, d.dk}), c.nv = count({d.batch, d.seqlen, d.heads, d.dv});
  c.nsk = count({c.dm.states, d.heads, p.slots, d.dk}), c.nsv = count({c.dm.states, d.heads, p.slots, d.dv});
  c.small = c.nq > 0 && c.nv > 0 && c.nsk > 0 && c.nsv > 0;
  return c;
}

void fuzz_bla_forward(FuzzedDataProvider &in) {
  BlaCall c = fuzz_bla_call(in, FSATTN_OP_BLA_FORWARD);
  if (c.valid && !c.small) return;
  const int64_t n = c.valid ? 1 : -1;
  Buffer q = input(in, n * c.nq), k = input(in, n * c.nq), v = input(in, n * c.nv);
  Buffer log_gamma = input(in, n * c.dm.d.heads), sk = input(in, n * c.nsk), sv = input(in, n * c.nsv);
  Buffer o = output(in, n * c.nv), sko = output(in, n * c.nsk), svo = output(in, n * c.nsv);
  c.p.log_gamma = log_gamma.ptr();
  fsattn_status st = fsattn_bla_forward(&c.exec, &c.dm.d, &c.p, q.ptr(), k.ptr(), v.ptr(), sk.ptr(), sv.ptr(), o.ptr(),
                                        sko.ptr(), svo.ptr());
  check_call(st, !c.valid || c.dm.refuse_layout, {&q, &k, &v, &log_gamma, &sk, &sv}, {&o, &sko, &svo});
}

void fuzz_bla_backward(FuzzedDataProvider &in) {
  BlaCall c = fuzz_bla_call(in, FSATTN_OP_BLA_BACKWARD);
  if (c.valid && !c.small) return;
  const int64_t n = c.valid ? 1 : -1;
  Buffer q = input(in, n * c.nq), k = input(in, n * c.nq), v = input(in, n * c.nv);
  Buffer log_gamma = input(in, n * c.dm.d.heads), sk = input(in, n * c.nsk), sv = input(in, n * c.nsv);
  Buffer d_o = input(in, n * c.nv), dsko = input(in, n * c.nsk), dsvo = input(in, n * c.nsv);
  Buffer dq = output(in, n * c.nq), dk = output(in, n * c.nq), dv = output(in, n * c.nv);
  Buffer dlg = output(in, n * c.dm.d.heads), dski = output(in, n * c.nsk), dsvi = output(in, n * c.nsv);
  c.p.log_gamma = log_gamma.ptr();
  fsattn_status st =
      fsattn_bla_backward(&c.exec, &c.dm.d, &c.p, q.ptr(), k.ptr(), v.ptr(), sk.ptr(), sv.ptr(), d_o.ptr(), dsko.ptr(),
                          dsvo.ptr(), dq.ptr(), dk.ptr(), dv.ptr(), dlg.ptr(), dski.ptr(), dsvi.ptr());
  check_call(st, !c.valid || c.dm.refuse_layout, {&q, &k, &v, &log_gamma, &sk, &sv, &d_o, &dsko, &dsvo},
             {&dq, &dk, &dv, &dlg, &dski, &dsvi});
}

void fuzz_bla_step(FuzzedDataProvider &in) {
  BlaCall c = fuzz_bla_call(in, FSATTN_OP_BLA_STEP);
  if (c.valid && !c.small) return;
  const bool valid = c.valid && c.dm.d.seqlen == 1 && c.dm.d.cu_seqlens == nullptr;
  const int64_t n = c.valid ? 1 : -1;
  Buffer q = input(in, n * c.nq), k = input(in, n * c.nq), v = input(in, n * c.nv);
  Buffer log_gamma = input(in, n * c.dm.d.heads), sk = input(in, n * c.nsk), sv = input(in, n * c.nsv);
  Buffer o = output(in, n * c.nv);
  const std::vector<float> sk0 = sk.data, sv0 = sv.data;
  c.p.log_gamma = log_gamma.ptr();
  fsattn_status st = fsattn_bla_step(&c.exec, &c.dm.d, &c.p, q.ptr(), k.ptr(), v.ptr(), sk.ptr(), sv.ptr(), o.ptr());
  check_call(st, !valid || c.dm.refuse_layout, {&q, &k, &v, &log_gamma}, {&o}, {&sk, &sv});
  if (st != FSATTN_OK) check(bits_equal(sk.data, sk0) && bits_equal(sv.data, sv0));
}

void fuzz_bla_interpolate(FuzzedDataProvider &in) {
  fsattn_exec exec = fuzz_exec(in, FSATTN_OP_BLA_INTERPOLATE);
  const int64_t B = fuzz_size(in, INT32_MAX), H = fuzz_size(in, FSATTN_MAX_HEADS),
                D = fuzz_size(in, FSATTN_MAX_FEATURE);
  const int64_t M = fuzz_size(in, FSATTN_MAX_FEATURE) - 1, S = fuzz_size(in, FSATTN_MAX_FEATURE);
  const int64_t N = fuzz_size(in, INT32_MAX);
  const double W = fuzz_double(in, 0.5, 100.0);
  const int64_t position =
      in.ConsumeBool() ? in.ConsumeIntegral<int64_t>() : in.ConsumeIntegralInRange<int64_t>(0, 1000);
  bool valid = in_range(B, 1, INT32_MAX) && in_range(H, 1, FSATTN_MAX_HEADS) && in_range(D, 1, FSATTN_MAX_FEATURE) &&
               in_range(M, 0, FSATTN_MAX_FEATURE) && in_range(S, 1, FSATTN_MAX_FEATURE) && in_range(N, 1, INT32_MAX) &&
               std::isfinite(W) && W >= FSATTN_BLA_MIN_PERIOD;
  const int64_t ns = count({B, H, S, D}), no = count({B, H, N, D});
  if (valid && !(ns > 0 && no > 0)) return;
  std::vector<double> lags(valid ? size_t(N) : 1);
  for (double &l : lags) l = fuzz_double(in, -200.0, 200.0);
  const bool null_lags = in.ConsumeIntegralInRange<int>(0, 15) == 0;
  Buffer state = input(in, valid ? ns : -1), out = output(in, valid ? no : -1);
  fsattn_status st = fsattn_bla_interpolate(&exec, B, H, D, M, W, S, position, null_lags ? nullptr : lags.data(), N,
                                            state.ptr(), out.ptr());
  check_call(st, !valid, {&state}, {&out});
}

// A tuning file: arbitrary bytes, or a well-formed file with fuzzed fields. Loading it either
// succeeds or is refused with a message; either way the table in use is described, and the
// variant a fuzzed call would run is a compiled one or the call is refused.
void fuzz_tuning(FuzzedDataProvider &in) {
  static const std::string path = "/tmp/fsattn_fuzz_tuning_" + std::to_string(getpid()) + ".json";
  std::string text;
  if (in.ConsumeBool()) {
    text = in.ConsumeRandomLengthString(4096);
  } else {
    const char *ops[] = {"ida_forward", "ida_backward", "bla_forward", "bla_backward", "ida_step", "bla_step", "x"};
    const fsattn_op op = fsattn_op(in.ConsumeIntegralInRange<int>(FSATTN_OP_IDA_FORWARD, FSATTN_OP_BLA_STEP));
    const char *variant = fsattn_variant_name(op, FSATTN_DEVICE_CPU, in.ConsumeIntegralInRange<int>(0, 3));
    auto number = [&] {
      return in.ConsumeBool() ? std::to_string(in.ConsumeIntegralInRange<int64_t>(1, 70000))
                              : std::to_string(in.ConsumeFloatingPoint<double>());
    };
    text = std::string("{\"format\": \"fsattn-tuning-1\", \"library\": \"") +
           (in.ConsumeBool() ? fsattn_version() : "9.9") + "\", \"cpu\": \"" + fsattn_device_name(FSATTN_DEVICE_CPU) +
           "\", \"entries\": [{\"op\": \"" + in.PickValueInArray(ops) + "\", \"device\": \"" +
           (in.ConsumeBool() ? "cpu" : "cuda") + "\", \"shape\": {\"batch\": " + number() +
           ", \"seqlen\": " + number() + ", \"heads\": " + number() + ", \"dk\": " + number() +
           ", \"dv\": " + number() + ", \"features\": " + number() + "}, \"variant\": \"" +
           (variant != nullptr ? variant : "none") + "\"}]}";
  }
  if (FILE *f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  const fsattn_status st = fsattn_load_tuning(path.c_str());
  check(st == FSATTN_OK || st == FSATTN_ERROR_INVALID_ARGUMENT);
  if (st != FSATTN_OK) check(std::strlen(fsattn_last_error()) > 0);
  check(std::strlen(fsattn_tuning_info()) > 0);
  const fsattn_op op = fsattn_op(in.ConsumeIntegralInRange<int>(FSATTN_OP_IDA_FORWARD, FSATTN_OP_BLA_STEP));
  const fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};
  const Dims dm = fuzz_dims(in);
  const char *v = fsattn_selected_variant(&exec, op, &dm.d, fuzz_size(in, FSATTN_MAX_FEATURE));
  check(v != nullptr ? std::strlen(v) > 0 : std::strlen(fsattn_last_error()) > 0);
  check(fsattn_load_tuning(nullptr) == FSATTN_OK);
}

// Calls refused before any buffer is read (no parameters), and the informational functions.
void fuzz_others(FuzzedDataProvider &in) {
  fsattn_exec exec = fuzz_exec(in, fsattn_op(in.ConsumeIntegralInRange<int>(0, 6)));
  Dims dm = fuzz_dims(in);
  float sink[4] = {kSentinel, kSentinel, kSentinel, kSentinel};
  fsattn_status st = FSATTN_OK;
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
    case 1: st = fsattn_ida_step(&exec, &dm.d, nullptr, sink, sink, sink, sink, sink, sink); break;
    case 2:
    case 3: st = fsattn_bla_step(&exec, &dm.d, nullptr, sink, sink, sink, sink, sink, sink); break;
    case 4: {
      const fsattn_op op = fsattn_op(in.ConsumeIntegralInRange<int>(FSATTN_OP_IDA_FORWARD, FSATTN_OP_BLA_STEP));
      const fsattn_device dev = in.ConsumeBool() ? FSATTN_DEVICE_CPU : FSATTN_DEVICE_CUDA;
      const int n = fsattn_variant_count(op, dev);
      check(n >= 0);
      const char *op_text = fsattn_op_name(fsattn_op(in.ConsumeIntegral<int>()));
      if (op_text != nullptr) check(std::strlen(op_text) > 0);
      const char *name = fsattn_variant_name(op, dev, in.ConsumeIntegral<int>());
      if (name != nullptr) check(std::strlen(name) > 0);
      return;
    }
    case 5:
      check(std::strlen(fsattn_version()) > 0);
      check(std::strlen(fsattn_status_string(fsattn_status(in.ConsumeIntegralInRange<int>(0, 5)))) > 0);
      return;
    case 6: fsattn_release_workspace(); return;
    default: fuzz_tuning(in); return;
  }
  check(st != FSATTN_OK);
  check_call(st, true, {}, {});
  for (float e : sink) check(e == kSentinel);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  const char *device = std::getenv("FSATTN_FUZZ_DEVICE");
  g_cuda = device != nullptr && std::string(device) == "cuda";
  std::string why;
  if (g_cuda && !gpu_available(&why)) {
    std::fprintf(stderr, "fsattn-fuzz: FSATTN_FUZZ_DEVICE=cuda, but %s\n", why.c_str());
    std::exit(1);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FuzzedDataProvider in(data, size);
  g_bad_detail.clear();
  g_call = in.ConsumeIntegralInRange<int>(0, 7);
  switch (g_call) {
    case 0: fuzz_ida_forward(in); break;
    case 1: fuzz_bla_forward(in); break;
    case 2: fuzz_bla_interpolate(in); break;
    case 3: fuzz_bla_backward(in); break;
    case 4: fuzz_ida_backward(in); break;
    case 5: fuzz_ida_step(in); break;
    case 6: fuzz_bla_step(in); break;
    default: fuzz_others(in); break;
  }
  return 0;
}
