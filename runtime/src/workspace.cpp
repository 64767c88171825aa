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

size_t rounded_size(size_t bytes) {
  const size_t page = bytes >= kMinCached ? 4096 : kAlign;
  return (bytes + kAlign + page - 1) / page * page;  // + the header slot
}

}  // namespace

void *workspace_malloc(void *, size_t bytes) {
  const size_t size = rounded_size(bytes);
  void *raw = nullptr;
  if (size >= kMinCached) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(size);
    if (it != cache.end() && !it->second.empty()) {
      raw = it->second.back();
      it->second.pop_back();
      cached_bytes -= size;
    }
  }
  if (raw == nullptr) raw = std::aligned_alloc(kAlign, size);
  if (raw == nullptr) return nullptr;  // Halide reports out of memory
  *static_cast<size_t *>(raw) = size;
  return static_cast<char *>(raw) + kAlign;
}

void workspace_free(void *, void *ptr) {
  if (ptr == nullptr) return;
  void *raw = static_cast<char *>(ptr) - kAlign;
  const size_t size = *static_cast<size_t *>(raw);
  if (size >= kMinCached) {
    std::lock_guard<std::mutex> lock(mu);
    if (cached_bytes + size <= kMaxCached) {
      cache[size].push_back(raw);
      cached_bytes += size;
      return;
    }
  }
  std::free(raw);
}

void workspace_release() {
  std::lock_guard<std::mutex> lock(mu);
  for (auto &bucket : cache) {
    for (void *raw : bucket.second) std::free(raw);
  }
  cache.clear();
  cached_bytes = 0;
}

}  // namespace fsattn

extern "C" void fsattn_release_workspace(void) { fsattn::workspace_release(); }
