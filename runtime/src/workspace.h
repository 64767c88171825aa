// The CPU workspace: Halide's allocator for kernel intermediates, with freed blocks kept for
// reuse by later calls.
#pragma once

#include <cstddef>

namespace fsattn {

void *workspace_malloc(void *user_context, size_t bytes);
void workspace_free(void *user_context, void *ptr);
void workspace_release();                // returns every cached block to the system
void workspace_set_limit(size_t bytes);  // 0: none

}  // namespace fsattn
