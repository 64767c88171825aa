// Build-time checks on every generated kernel. Halide only warns when it proves that a
// pipeline will fail one of its own assertions on every call (a schedule that bounds a stage
// more tightly than its consumers need it); such a kernel would build and then fail every
// call (on CUDA, a trap that loses the caller's context). Here that warning fails the build.
#include <Halide.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

class FailOnCertainFailure : public Halide::CompileTimeErrorReporter {
 public:
  void warning(const char *msg) override {
    std::fputs(msg, stderr);
    if (std::strstr(msg, "guaranteed to fail") != nullptr) {
      std::fputs("fsattn: refusing to emit a kernel that Halide proves always fails\n", stderr);
      std::exit(1);
    }
  }
  // Halide requires that error() not return; the generator fails as it would by default.
  void error(const char *msg) override {
    std::fputs(msg, stderr);
    std::exit(1);
  }
};

FailOnCertainFailure reporter;
const bool installed = [] {
  Halide::set_custom_compile_time_error_reporter(&reporter);
  return true;
}();

}  // namespace
