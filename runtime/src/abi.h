// The caller's structs at the size the caller says they have (their struct_size), copied
// into this library's layout: fields past the caller's size take their zero default, and a
// caller's struct longer than ours must hold zeros past our end (fields we cannot honour).
// Entry points read every struct this way before anything else, so no code reads past the
// end of an older caller's shorter struct.
#pragma once

#include "fsattn/fsattn.h"
#include "status.h"

#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>

namespace fsattn {

// Each struct's size in the first release of this ABI (1.0): the smallest a caller may pass.
template <typename T>
struct FirstRelease;
template <>
struct FirstRelease<fsattn_exec> {
  static constexpr size_t size = 32;
  static constexpr const char *name = "fsattn_exec";
};
template <>
struct FirstRelease<fsattn_dims> {
  static constexpr size_t size = 64;
  static constexpr const char *name = "fsattn_dims";
};
template <>
struct FirstRelease<fsattn_layout> {  // added in 1.1
  static constexpr size_t size = 200;
  static constexpr const char *name = "fsattn_layout";
};
template <>
struct FirstRelease<fsattn_ida_params> {
  static constexpr size_t size = 96;
  static constexpr const char *name = "fsattn_ida_params";
};
template <>
struct FirstRelease<fsattn_ida_grads> {
  static constexpr size_t size = 80;
  static constexpr const char *name = "fsattn_ida_grads";
};
template <>
struct FirstRelease<fsattn_bla_params> {
  static constexpr size_t size = 56;
  static constexpr const char *name = "fsattn_bla_params";
};

// No padding at the end of a struct, so that the bytes past an older library's struct are
// fields of a newer one, never padding a caller may leave uninitialised.
static_assert(offsetof(fsattn_exec, variant) + sizeof(void *) == sizeof(fsattn_exec), "no tail padding");
static_assert(offsetof(fsattn_dims, layout) + sizeof(void *) == sizeof(fsattn_dims), "no tail padding");
static_assert(offsetof(fsattn_layout, dv) + sizeof(fsattn_strides) == sizeof(fsattn_layout), "no tail padding");
static_assert(offsetof(fsattn_ida_params, C) + sizeof(void *) == sizeof(fsattn_ida_params), "no tail padding");
static_assert(offsetof(fsattn_ida_grads, C) + sizeof(void *) == sizeof(fsattn_ida_grads), "no tail padding");
static_assert(offsetof(fsattn_bla_params, log_gamma) + sizeof(void *) == sizeof(fsattn_bla_params), "no tail padding");

// A struct_size larger than this is no size a header ever declared (an uninitialised field).
constexpr size_t kMaxStructSize = 4096;

// Reads `in` (T's first member is size_t struct_size) into `copy` at this library's size.
// Returns the copy, or `in` itself when it is NULL (the argument checks name it), or NULL
// with the failure recorded in *status. `Known` is the layout this library reads: T, or a
// longer struct in tests that play a newer library.
template <typename T, typename Known = T>
const Known *read_struct(const char *function, const char *name, const T *in, Known *copy, fsattn_status *status) {
  static_assert(std::is_trivially_copyable<Known>::value && offsetof(Known, struct_size) == 0, "versioned struct");
  static_assert(sizeof(Known) >= FirstRelease<T>::size, "a struct only grows");
  if (in == nullptr || *status != FSATTN_OK) return nullptr;
  size_t size = 0;
  std::memcpy(&size, in, sizeof size);
  const std::string field = std::string(function) + ": " + name + "->struct_size";
  if (size < FirstRelease<T>::size || size > kMaxStructSize) {
    *status =
        fail(FSATTN_ERROR_INVALID_ARGUMENT, field + " is " + std::to_string(size) + ", not the size of an " +
                                                FirstRelease<T>::name + " (" + std::to_string(FirstRelease<T>::size) +
                                                " bytes or more): initialise it with its " + "FSATTN_*_INIT macro");
    return nullptr;
  }
  const unsigned char *bytes = reinterpret_cast<const unsigned char *>(in);
  for (size_t i = sizeof(Known); i < size; ++i) {
    if (bytes[i] != 0) {
      *status = fail(FSATTN_ERROR_UNSUPPORTED,
                     field + " is " + std::to_string(size) + " and byte " + std::to_string(i) +
                         " is set: the caller's header has fields this fsattn " + fsattn_version() +
                         " does not know (its " + FirstRelease<T>::name + " has " + std::to_string(sizeof(Known)) +
                         " bytes); link a newer library, or leave those fields zero");
      return nullptr;
    }
  }
  std::memset(static_cast<void *>(copy), 0, sizeof(Known));
  std::memcpy(static_cast<void *>(copy), in, size < sizeof(Known) ? size : sizeof(Known));
  copy->struct_size = sizeof(Known);
  return copy;
}

// Reads one entry point's structs in turn; after the first failure the others read as NULL.
class StructReader {
 public:
  explicit StructReader(const char *function) : fn_(function) {}
  template <typename T>
  const T *read(const char *name, const T *in, T *copy) {
    const T *out = read_struct(fn_, name, in, copy, &status_);
    return in == nullptr ? nullptr : out;
  }
  bool ok() const { return status_ == FSATTN_OK; }
  fsattn_status status() const { return status_; }

 private:
  const char *fn_;
  fsattn_status status_ = FSATTN_OK;
};

// The structs a mixer's entry point takes (exec, dims, its parameters), read in turn; read()
// points the caller's pointers at the copies.
// dims->layout, when given, is read the same way and dims points at the copy.
template <typename Params>
struct CallStructs {
  fsattn_exec exec;
  fsattn_dims dims;
  fsattn_layout layout;
  Params params;
  fsattn_status read(const char *function, const fsattn_exec *&e, const fsattn_dims *&d, const Params *&p) {
    StructReader in(function);
    e = in.read("exec", e, &exec), d = in.read("dims", d, &dims);
    if (d != nullptr && dims.layout != nullptr) dims.layout = in.read("dims->layout", dims.layout, &layout);
    p = in.read("p", p, &params);
    return in.status();
  }
};

}  // namespace fsattn
