#include "status.h"

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
