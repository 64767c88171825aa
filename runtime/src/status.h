// The thread-local last-error message and the helpers that set it.
#pragma once

#include "fsattn/fsattn.h"

#include <exception>
#include <new>
#include <string>

namespace fsattn {

// Records `message` as this thread's last error and returns `status`.
fsattn_status fail(fsattn_status status, const std::string &message);
// Clears this thread's last error (a successful call leaves "" behind).
void clear_error();

// Runs the body of the entry point `function` with a cleared error: an exception (out of
// memory while copying an argument) becomes a status instead of crossing the C ABI.
template <typename Body>
fsattn_status guarded(const char *function, Body &&body) {
  clear_error();
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return fail(FSATTN_ERROR_OUT_OF_MEMORY, std::string(function) + ": out of host memory");
  } catch (const std::exception &e) {
    return fail(FSATTN_ERROR_INTERNAL, std::string(function) + ": " + e.what());
  }
}

}  // namespace fsattn
