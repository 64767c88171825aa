#include "status.h"
#include "validate.h"

namespace fsattn {

namespace {
thread_local std::string last_error;
}

fsattn_status fail(fsattn_status status, const std::string &message) {
  last_error = message;
  return status;
}

void clear_error() { last_error.clear(); }

}  // namespace fsattn

extern "C" const char *fsattn_last_error(void) { return fsattn::last_error.c_str(); }

extern "C" const char *fsattn_status_string(fsattn_status status) {
  switch (fsattn::enum_value(status)) {
    case FSATTN_OK: return "ok";
    case FSATTN_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case FSATTN_ERROR_UNSUPPORTED: return "unsupported";
    case FSATTN_ERROR_DEVICE: return "device error";
    case FSATTN_ERROR_OUT_OF_MEMORY: return "out of memory";
    case FSATTN_ERROR_INTERNAL: return "internal error";
    default: return "unknown status";
  }
}
