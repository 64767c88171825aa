#include "workspace.h"

#ifdef FSATTN_HAS_CUDA
#include "cuda_call.h"
#endif

#include "fsattn/fsattn.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace fsattn {

// Kernels allocate their intermediates per call (chunk states, carries, feature maps: about
// 90 MB for IDA at B=2, T=2048, H=4, D=64, M=64). Fresh pages from the OS cost 17 ms of a
// 64 ms call on the 2-core Xeon (page faults); reusing freed blocks removes that. Blocks of
// 64 KiB and more are cached by exact (rounded) size, up to kMaxCached bytes in all. Smaller
// blocks (per-chunk scratch, thousands per call) are kept per thread, without a lock, up to
// kMaxSmallPerThread bytes each: through malloc and free they cost 5-6% of a call.
namespace {

constexpr size_t kAlign = 128;  // Halide wants >= 32; a header slot of one line
constexpr size_t kMinCached = 64 << 10;
constexpr size_t kMaxCached = size_t(4) << 30;
constexpr size_t kMaxSmallPerThread = size_t(4) << 20;

// This thread's free small blocks by rounded size, returned to the system at thread exit.
struct SmallCache {
  std::unordered_map<size_t, std::vector<void *>> blocks;
  size_t bytes = 0;
  void release() {
    for (auto &bucket : blocks) {
      for (void *raw : bucket.second) std::free(raw);
    }
    blocks.clear();
    bytes = 0;
  }
  ~SmallCache() { release(); }
};
thread_local SmallCache small_cache;

void *pop_small(size_t size) {
  auto it = small_cache.blocks.find(size);
  if (it == small_cache.blocks.end() || it->second.empty()) return nullptr;
  void *raw = it->second.back();
  it->second.pop_back();
  small_cache.bytes -= size;
  return raw;
}

// Small blocks (most of the ~27k allocations of an IDA call are per-chunk scratch under
// 64 KiB) never take the lock: the byte counts are atomics, the lock guards only the cache.
std::mutex mu;
std::unordered_map<size_t, std::vector<void *>> cache;  // rounded size -> raw blocks (under mu)
std::atomic<size_t> cached_bytes{0};
std::atomic<size_t> used_bytes{0};   // handed out and not yet freed
std::atomic<size_t> limit_bytes{0};  // 0: no limit on used + cached

size_t rounded_size(size_t bytes) {
  const size_t page = bytes >= kMinCached ? 4096 : kAlign;
  return (bytes + kAlign + page - 1) / page * page;  // + the header slot
}

void release_cache_locked() {
  for (auto &bucket : cache) {
    for (void *raw : bucket.second) std::free(raw);
  }
  cache.clear();
  cached_bytes = 0;
}

void *pop_cached(size_t size) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(size);
  if (it == cache.end() || it->second.empty()) return nullptr;
  void *raw = it->second.back();
  it->second.pop_back();
  cached_bytes -= size;
  return raw;
}

// Counts `size` more bytes in use; false (nothing counted) when that exceeds the limit even
// after the cache is emptied.
bool reserve(size_t size) {
  const size_t used = used_bytes.fetch_add(size) + size;
  const size_t limit = limit_bytes.load();
  if (limit == 0 || used + cached_bytes.load() <= limit) return true;
  {
    std::lock_guard<std::mutex> lock(mu);
    release_cache_locked();
  }
  if (used_bytes.load() <= limit) return true;
  used_bytes -= size;
  return false;
}

}  // namespace

// Block header: its rounded size, and how many of its bytes were counted in used_bytes. Small
// blocks are counted only while a limit is set: counting every one cost 3% of a BLA call
// (the shared counter's cache line moves between the threads at every allocation).
struct Header {
  size_t size;
  size_t counted;
};

void *workspace_malloc(void *, size_t bytes) {
  const size_t size = rounded_size(bytes);
  if (size < bytes) return nullptr;  // the rounding overflowed
  const bool count = size >= kMinCached || limit_bytes.load(std::memory_order_relaxed) != 0;
  void *raw = size >= kMinCached ? pop_cached(size) : count ? nullptr : pop_small(size);
  if (raw != nullptr) {
    used_bytes += size;
  } else {
    if (count && !reserve(size)) return nullptr;  // over the budget: Halide reports out of memory
    raw = std::aligned_alloc(kAlign, size);
    if (raw == nullptr) {
      if (count) used_bytes -= size;
      return nullptr;  // Halide reports out of memory
    }
  }
  *static_cast<Header *>(raw) = Header{size, count ? size : 0};
  return static_cast<char *>(raw) + kAlign;
}

void workspace_free(void *, void *ptr) {
  if (ptr == nullptr) return;
  void *raw = static_cast<char *>(ptr) - kAlign;
  const Header header = *static_cast<Header *>(raw);
  const size_t size = header.size;
  if (header.counted != 0) used_bytes -= header.counted;
  if (size >= kMinCached) {
    std::lock_guard<std::mutex> lock(mu);
    const size_t limit = limit_bytes.load();
    if (cached_bytes + size <= kMaxCached && (limit == 0 || used_bytes + cached_bytes + size <= limit)) {
      cache[size].push_back(raw);
      cached_bytes += size;
      return;
    }
  } else if (header.counted == 0 && limit_bytes.load(std::memory_order_relaxed) == 0 &&
             small_cache.bytes + size <= kMaxSmallPerThread) {
    small_cache.blocks[size].push_back(raw);
    small_cache.bytes += size;
    return;
  }
  std::free(raw);
}

void workspace_release() {
  small_cache.release();
  std::lock_guard<std::mutex> lock(mu);
  release_cache_locked();
}

void workspace_set_limit(size_t bytes) {
  if (bytes != 0) small_cache.release();
  std::lock_guard<std::mutex> lock(mu);
  limit_bytes = bytes;
  if (bytes != 0 && used_bytes + cached_bytes > bytes) release_cache_locked();
}

}  // namespace fsattn

extern "C" void fsattn_release_workspace(void) {
  fsattn::workspace_release();
#ifdef FSATTN_HAS_CUDA
  fsattn::release_device_workspace();  // the CUDA workspace's cached device blocks
#endif
}
extern "C" void fsattn_set_workspace_limit(size_t bytes) { fsattn::workspace_set_limit(bytes); }
