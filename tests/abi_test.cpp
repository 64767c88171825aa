// The ABI's growth rule (docs/spec.md §5, "Extensible structs"): a caller built against these
// structs keeps working with a library whose structs have grown, and a caller built against
// grown structs works with this library while it leaves the new fields zero.
#include "abi.h"
#include "cases.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <string>

using namespace fsattn;
using namespace fsattn::test;

extern "C" const char *c_status_string(int status);
extern "C" fsattn_status c_bla_step(const float *q, const float *k, const float *v, float *state_k, float *state_v,
                                    float *o, const float *log_gamma);

namespace {

// The structs as a later release might declare them: this release's fields, then one more
// 8-byte field whose zero means "as before".
struct ExecNext {
  size_t struct_size;
  fsattn_device device;
  void *stream;
  const char *variant;
  int64_t added;
};
struct DimsNext {
  size_t struct_size;
  int64_t batch, seqlen, heads, dk, dv;
  const int64_t *cu_seqlens;
  int64_t num_seqs;
  const fsattn_layout *layout;
  int64_t added;
};
struct BlaParamsNext {
  size_t struct_size;
  int64_t modes;
  double period;
  int64_t slots;
  float scale;
  int64_t pos0;
  const float *log_gamma;
  int64_t added;
};

// A copy of `value` whose last byte is the last readable byte of a page: a read past the
// struct's end faults.
template <typename T>
class AtPageEnd {
 public:
  explicit AtPageEnd(const T &value) {
    page_ = size_t(sysconf(_SC_PAGESIZE));
    base_ = mmap(nullptr, 2 * page_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(base_, MAP_FAILED);
    EXPECT_EQ(mprotect(static_cast<char *>(base_) + page_, page_, PROT_NONE), 0);
    ptr_ = reinterpret_cast<T *>(static_cast<char *>(base_) + page_ - sizeof(T));
    std::memcpy(static_cast<void *>(ptr_), &value, sizeof(T));
  }
  ~AtPageEnd() { munmap(base_, 2 * page_); }
  const T *get() const { return ptr_; }

 private:
  size_t page_ = 0;
  void *base_ = nullptr;
  T *ptr_ = nullptr;
};

// An older caller's struct read by a newer library: every field the caller has, the new one
// at its default, nothing read past the caller's end.
template <typename T, typename Next>
void expect_read_as_newer(const T &caller) {
  AtPageEnd<T> placed(caller);
  Next copy;
  std::memset(static_cast<void *>(&copy), 0xAB, sizeof copy);
  fsattn_status status = FSATTN_OK;
  const Next *read = read_struct<T, Next>("test", "arg", placed.get(), &copy, &status);
  ASSERT_EQ(status, FSATTN_OK) << fsattn_last_error();
  ASSERT_EQ(read, &copy);
  EXPECT_EQ(copy.struct_size, sizeof(Next));
  EXPECT_EQ(0, std::memcmp(reinterpret_cast<const char *>(&copy) + sizeof(size_t),
                           reinterpret_cast<const char *>(&caller) + sizeof(size_t), sizeof(T) - sizeof(size_t)));
  EXPECT_EQ(copy.added, 0);
}

TEST(Abi, OlderCallersStructsReadByANewerLibrary) {
  const BlaCase c = make_bla_case({2, 9, 3, 4, 5, 2, 7.5, 5}, 11, 1, 0.9, false);
  expect_read_as_newer<fsattn_exec, ExecNext>(fsattn_exec FSATTN_EXEC_INIT);
  expect_read_as_newer<fsattn_dims, DimsNext>(c.dims());
  expect_read_as_newer<fsattn_bla_params, BlaParamsNext>(c.params());
}

// The same call through this release's structs and through grown ones (new fields zero),
// each struct ending at a page's end; a non-zero new field is refused with nothing written.
TEST(Abi, NewerCallersStructsWithZeroNewFieldsWork) {
  const BlaCase c = make_bla_case({2, 9, 3, 4, 5, 2, 7.5, 5}, 11, 2, 0.9, false);
  const BlaResult want = run_bla_forward(c);
  ASSERT_EQ(want.status, FSATTN_OK) << fsattn_last_error();

  const fsattn_dims d = c.dims();
  const fsattn_bla_params p = c.params();
  ExecNext exec{sizeof(ExecNext), FSATTN_DEVICE_CPU, nullptr, nullptr, 0};
  DimsNext dims{sizeof(DimsNext), d.batch, d.seqlen, d.heads, d.dk, d.dv, nullptr, 0, nullptr, 0};
  BlaParamsNext params{sizeof(BlaParamsNext), p.modes, p.period, p.slots, p.scale, p.pos0, p.log_gamma, 0};
  const size_t n_o = want.o.size(), n_sk = want.state_k.size(), n_sv = want.state_v.size();
  auto call = [&](std::vector<float> *o, std::vector<float> *sk, std::vector<float> *sv) {
    AtPageEnd<ExecNext> e(exec);
    AtPageEnd<DimsNext> dm(dims);
    AtPageEnd<BlaParamsNext> pp(params);
    o->assign(n_o, -7.0f), sk->assign(n_sk, -7.0f), sv->assign(n_sv, -7.0f);
    return fsattn_bla_forward(reinterpret_cast<const fsattn_exec *>(e.get()),
                              reinterpret_cast<const fsattn_dims *>(dm.get()),
                              reinterpret_cast<const fsattn_bla_params *>(pp.get()), c.q.ptr(), c.k.ptr(), c.v.ptr(),
                              nullptr, nullptr, o->data(), sk->data(), sv->data());
  };
  std::vector<float> o, sk, sv;
  ASSERT_EQ(call(&o, &sk, &sv), FSATTN_OK) << fsattn_last_error();
  EXPECT_EQ(o, want.o);
  EXPECT_EQ(sk, want.state_k);
  EXPECT_EQ(sv, want.state_v);

  const std::vector<float> untouched(n_o, -7.0f);
  for (int which = 0; which < 3; ++which) {
    SCOPED_TRACE(which);
    (which == 0 ? exec.added : which == 1 ? dims.added : params.added) = 1;
    EXPECT_EQ(call(&o, &sk, &sv), FSATTN_ERROR_UNSUPPORTED);
    EXPECT_NE(std::string(fsattn_last_error()).find("does not know"), std::string::npos) << fsattn_last_error();
    EXPECT_EQ(o, untouched);
    exec.added = dims.added = params.added = 0;
  }
}

// A struct_size of 0 (a struct not initialised with its macro), one below this release's
// size, or one no header declares, is refused by every entry point that takes the struct.
TEST(Abi, BadStructSizesAreRefused) {
  const IdaCase ic = make_ida_case({1, 5, 2, 4, 4, 3}, 3, false);
  const BlaCase bc = make_bla_case({1, 5, 2, 4, 4, 1, 4.0, 3}, 0, 4, 0.9, false);
  std::vector<float> o(5 * 2 * 4, -7.0f), sk(2 * 3 * 4 * 2), sv(2 * 3 * 4 * 2), dq(40), dk(40), dv(40), dlg(2);
  const std::vector<float> o0 = o;
  for (size_t bad : {size_t(0), sizeof(fsattn_exec) - 8, size_t(1) << 40}) {
    SCOPED_TRACE(bad);
    for (int arg = 0; arg < 4; ++arg) {
      fsattn_exec exec = FSATTN_EXEC_INIT;
      fsattn_dims idims = ic.dims(), bdims = bc.dims();
      fsattn_ida_params ip = ic.params();
      fsattn_bla_params bp = bc.params();
      fsattn_ida_grads dp = FSATTN_IDA_GRADS_INIT;
      const char *name = arg == 0   ? "exec->struct_size"
                         : arg == 1 ? "dims->struct_size"
                         : arg == 2 ? "p->struct_size"
                                    : "dp->struct_size";
      if (arg == 0) exec.struct_size = bad;
      if (arg == 1) idims.struct_size = bdims.struct_size = bad;
      if (arg == 2) ip.struct_size = bp.struct_size = bad;
      if (arg == 3) dp.struct_size = bad;
      auto expect_refused = [&](fsattn_status st, const char *fn) {
        EXPECT_EQ(st, FSATTN_ERROR_INVALID_ARGUMENT) << fn;
        EXPECT_NE(std::string(fsattn_last_error()).find(name), std::string::npos) << fn << ": " << fsattn_last_error();
        EXPECT_EQ(o, o0) << fn;
      };
      expect_refused(
          fsattn_ida_backward(&exec, &idims, &ip, ic.q.ptr(), ic.k.ptr(), ic.v.ptr(), nullptr, nullptr, o.data(),
                              nullptr, nullptr, dq.data(), dk.data(), dv.data(), &dp, nullptr, nullptr),
          "fsattn_ida_backward");
      if (arg == 3) continue;
      expect_refused(fsattn_ida_forward(&exec, &idims, &ip, ic.q.ptr(), ic.k.ptr(), ic.v.ptr(), nullptr, nullptr,
                                        o.data(), sk.data(), sv.data()),
                     "fsattn_ida_forward");
      expect_refused(fsattn_bla_forward(&exec, &bdims, &bp, bc.q.ptr(), bc.k.ptr(), bc.v.ptr(), nullptr, nullptr,
                                        o.data(), nullptr, nullptr),
                     "fsattn_bla_forward");
      expect_refused(
          fsattn_bla_backward(&exec, &bdims, &bp, bc.q.ptr(), bc.k.ptr(), bc.v.ptr(), nullptr, nullptr, o.data(),
                              nullptr, nullptr, dq.data(), dk.data(), dv.data(), dlg.data(), nullptr, nullptr),
          "fsattn_bla_backward");
      if (arg == 0) {
        const double lag = 0;
        expect_refused(fsattn_bla_interpolate(&exec, 1, 1, 4, 1, 4.0, 3, 0, &lag, 1, sk.data(), o.data()),
                       "fsattn_bla_interpolate");
      }
      if (arg < 2) EXPECT_EQ(fsattn_selected_variant(&exec, FSATTN_OP_BLA_FORWARD, &bdims, 3), nullptr);
    }
  }
}

TEST(Abi, VersionAndStatusStrings) {
  const std::string header = std::to_string(FSATTN_VERSION_MAJOR) + "." + std::to_string(FSATTN_VERSION_MINOR) + "." +
                             std::to_string(FSATTN_VERSION_PATCH);
  EXPECT_EQ(header, fsattn_version());
  EXPECT_STREQ(fsattn_status_string(FSATTN_OK), "ok");
  EXPECT_STREQ(fsattn_status_string(FSATTN_ERROR_INVALID_ARGUMENT), "invalid argument");
  EXPECT_STREQ(fsattn_status_string(FSATTN_ERROR_INTERNAL), "internal error");
  EXPECT_STREQ(c_status_string(99), "unknown status");
  EXPECT_STREQ(c_status_string(-1), "unknown status");
}

// A C caller's structs, set up by the macros, give the same step as the C++ harness's.
TEST(Abi, CCallerWithInitMacros) {
  BlaCase c = make_bla_case({1, 1, 2, 4, 4, 1, 8.0, 3}, 5, 9, 0.9, true);
  std::vector<float> sk = c.state_k.f, sv = c.state_v.f, o(8, NAN);
  ASSERT_EQ(c_bla_step(c.q.ptr(), c.k.ptr(), c.v.ptr(), sk.data(), sv.data(), o.data(), c.log_gamma.ptr()), FSATTN_OK)
      << fsattn_last_error();
  const BlaResult want = run_bla_forward(c);
  ASSERT_EQ(want.status, FSATTN_OK) << fsattn_last_error();
  EXPECT_LE(rel_error(o, want.o), 1e-6);
  EXPECT_LE(rel_error(sk, want.state_k), 1e-6);
}

}  // namespace
