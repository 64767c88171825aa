// The thread-local last-error message and the helpers that set it.
#pragma once

#include "fsattn/fsattn.h"

#include <string>

namespace fsattn {

// Records `message` as this thread's last error and returns `status`.
fsattn_status fail(fsattn_status status, const std::string &message);
// Clears this thread's last error (a successful call leaves "" behind).
void clear_error();

}  // namespace fsattn
