#include "workspace.h"

#include "fsattn/fsattn.h"

#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace fsattn {

// Kernels allocate their intermediates per call (chunk states, carries, feature maps: about
// 90 MB for IDA at B=2, T=2048, H=4, D=64, M=64). Fresh pages from the OS cost 17 ms of a
// 64 ms call on the 2-core Xeon (page faults); reusing freed blocks removes that. Blocks of
// 64 KiB and more are cached by exact (rounded) size, up to kMaxCached bytes in all.
namespace {

constexpr size_t kAlign = 128;             // Halide wants >= 32; a header slot of one line
constexpr size_t kMinCached = 64 << 10;
constexpr size_t kMaxCached = size_t(4) << 30;

std::mutex mu;
std::unordered_map<size_t, std::vector<void *>> cache;  // rounded size -> raw blocks
size_t cached_bytes = 0;
size_t used_bytes = 0;   // handed out and not yet freed
size_t limit_bytes = 0;  // 0: no limit on used + cached

void release_cache_locked() {
  for (auto &bucket : cache) {
    for (void *raw : bucket.second) std::free(raw);
  }
  cache.clear();
  cached_bytes = 0;
}

size_t rounded_size(size_t bytes) {
  const size_t page = bytes >= kMinCached ? 4096 : kAlign;
  return (bytes + kAlign + page - 1) / page * page;  // + the header slot
}

}  // namespace

void *workspace_malloc(void *, size_t bytes) {
  const size_t size = rounded_size(bytes);
  if (size < bytes) return nullptr;  // the rounding overflowed
  void *raw = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (size >= kMinCached) {
      auto it = cache.find(size);
      if (it != cache.end() && !it->second.empty()) {
        raw = it->second.back();
        it->second.pop_back();
        cached_bytes -= size;
      }
    }
    if (raw == nullptr && limit_bytes != 0 && used_bytes + cached_bytes + size > limit_bytes) {
      release_cache_locked();
      if (used_bytes + size > limit_bytes) return nullptr;  // over the budget: out of memory
    }
    used_bytes += size;  // reserved before the allocation, so concurrent calls see it
  }
  if (raw == nullptr) raw = std::aligned_alloc(kAlign, size);
  if (raw == nullptr) {
    std::lock_guard<std::mutex> lock(mu);
    used_bytes -= size;
    return nullptr;  // Halide reports out of memory
  }
  *static_cast<size_t *>(raw) = size;
  return static_cast<char *>(raw) + kAlign;
}

void workspace_free(void *, void *ptr) {
  if (ptr == nullptr) return;
  void *raw = static_cast<char *>(ptr) - kAlign;
  const size_t size = *static_cast<size_t *>(raw);
  {
    std::lock_guard<std::mutex> lock(mu);
    used_bytes -= size;
    if (size >= kMinCached && cached_bytes + size <= kMaxCached &&
        (limit_bytes == 0 || used_bytes + cached_bytes + size <= limit_bytes)) {
      cache[size].push_back(raw);
      cached_bytes += size;
      return;
    }
  }
  std::free(raw);
}

void workspace_release() {
  std::lock_guard<std::mutex> lock(mu);
  release_cache_locked();
}

void workspace_set_limit(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu);
  limit_bytes = bytes;
  if (limit_bytes != 0 && used_bytes + cached_bytes > limit_bytes) release_cache_locked();
}

}  // namespace fsattn

extern "C" void fsattn_release_workspace(void) { fsattn::workspace_release(); }
extern "C" void fsattn_set_workspace_limit(size_t bytes) { fsattn::workspace_set_limit(bytes); }
