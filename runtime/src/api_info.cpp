// Library information, and the entry points whose kernels this build does not have yet.
#include "status.h"

#include <string>

using fsattn::fail;

extern "C" const char *fsattn_version(void) { return FSATTN_VERSION_STRING; }

namespace {
fsattn_status not_built(const char *function) {
  return fail(FSATTN_ERROR_UNSUPPORTED, std::string(function) + ": not implemented in this version");
}
}  // namespace

extern "C" {

fsattn_status fsattn_ida_step(const fsattn_exec *, const fsattn_dims *, const fsattn_ida_params *,
                              const float *, const float *, const float *, float *, float *, float *) {
  return not_built("fsattn_ida_step");
}

fsattn_status fsattn_bla_step(const fsattn_exec *, const fsattn_dims *, const fsattn_bla_params *,
                              const float *, const float *, const float *, float *, float *, float *) {
  return not_built("fsattn_bla_step");
}

}  // extern "C"
