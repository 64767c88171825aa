#include "tuning.h"

#include "status.h"
#include "validate.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace fsattn {

namespace {

using Json = nlohmann::json;

// runtime/tuning/builtin.json, as the string kBuiltinTuning.
#include "builtin_tuning.inc"

struct Entry {
  fsattn_op op;
  fsattn_device device;
  CallShape shape;
  const Kernel *kernel;
};

struct Table {
  std::vector<Entry> entries;
  std::string info;  // what fsattn_tuning_info says
};

// A tuning file's values lie at most 4 levels deep. nlohmann's parser keeps its stack on the
// heap, but copying or printing a parsed value recurses: values deeper than this are dropped
// while parsing (a parser callback) and the file refused, so no file can exhaust the stack.
constexpr int kMaxDepth = 32;

// Parses `text` into *out; on failure returns false with the reason in *why, naming the line
// and column where nlohmann gives them. Its exceptions carry that position, so they are
// thrown and caught here: none leaves this function (the C API never throws).
bool parse_json(const std::string &text, Json *out, std::string *why) {
  // nlohmann reads a NUL as the end of the input: refuse it rather than ignore what follows.
  if (const size_t nul = text.find('\0'); nul != std::string::npos) {
    *why = "byte " + std::to_string(nul + 1) + ": a NUL character";
    return false;
  }
  bool too_deep = false;
  const Json::parser_callback_t limit_depth = [&too_deep](int depth, Json::parse_event_t, Json &) {
    too_deep |= depth > kMaxDepth;
    return depth <= kMaxDepth;  // false: the value is not kept
  };
  try {
    *out = Json::parse(text, limit_depth);
  } catch (const Json::exception &e) {  // parse_error, or out_of_range for a number like 1e999
    // what() is "[json.exception.parse_error.101] parse error at line 1, column 9: ...".
    *why = e.what();
    const size_t tag = why->find("] ");
    if (tag != std::string::npos) why->erase(0, tag + 2);
    const std::string prefix = "parse error at ";
    if (why->compare(0, prefix.size(), prefix) == 0) why->erase(0, prefix.size());
    return false;
  }
  if (too_deep) *why = "nested more than " + std::to_string(kMaxDepth) + " levels deep";
  return !too_deep;
}

// The member `key` of `v`, or NULL (also when `v` is not an object).
const Json *member(const Json &v, const char *key) {
  const auto it = v.find(key);  // end() when `v` is not an object
  return it != v.end() ? &*it : nullptr;
}

// The member `key` of `v` if it is a string, else NULL.
const std::string *string_member(const Json &v, const char *key) {
  const Json *m = member(v, key);
  return m != nullptr ? m->get_ptr<const Json::string_t *>() : nullptr;  // NULL if not a string
}

// A table description's device part: "NVIDIA H200 (compute capability 9.0)".
std::string gpu_of(const Json &file) {
  const std::string *g = string_member(file, "gpu");
  return g != nullptr ? *g : std::string();
}

// A number in [1, 9.2e18] with no fraction: 4, also 4.0 or 4e0. (The types are checked
// before each get<>, which then cannot throw.)
bool positive_integer(const Json *v, int64_t *out) {
  constexpr uint64_t kMax = 9'200'000'000'000'000'000u;
  if (v != nullptr && v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    if (u < 1 || u > kMax) return false;
    *out = int64_t(u);
    return true;
  }
  if (v == nullptr || !v->is_number_float()) return false;  // not a number, or a negative integer
  const double d = v->get<double>();
  if (!(d >= 1 && d <= double(kMax)) || d != std::floor(d)) return false;
  *out = int64_t(d);
  return true;
}

// One entry of the file's "entries" array. builtin: an entry whose variant this build lacks
// is skipped (false with an empty error), not an error.
bool read_entry(const Json &e, size_t index, bool builtin, Entry *out, std::string *error) {
  const std::string where = "entries[" + std::to_string(index) + "]";
  const std::string *op = string_member(e, "op"), *device = string_member(e, "device"),
                    *variant = string_member(e, "variant");
  if (op == nullptr || !parse_op(*op, &out->op)) {
    *error = where + ": \"op\" must name an op (ida_forward, ida_backward, bla_forward, ...)";
    return false;
  }
  if (device == nullptr || (*device != "cpu" && *device != "cuda")) {
    *error = where + ": \"device\" must be \"cpu\" or \"cuda\"";
    return false;
  }
  out->device = *device == "cuda" ? FSATTN_DEVICE_CUDA : FSATTN_DEVICE_CPU;
  CallShape &s = out->shape;
  const Json *shape = member(e, "shape");
  const char *names[] = {"batch", "seqlen", "heads", "dk", "dv", "features"};
  int64_t *fields[] = {&s.batch, &s.seqlen, &s.heads, &s.dk, &s.dv, &s.features};
  for (int i = 0; i < 6; ++i) {
    if (shape == nullptr || !positive_integer(member(*shape, names[i]), fields[i])) {
      *error = where + ": \"shape\" must give \"" + names[i] + "\" as a positive integer";
      return false;
    }
  }
  if (variant == nullptr) {
    *error = where + ": \"variant\" must be a string";
    return false;
  }
  out->kernel = compiled_kernel(out->op, out->device, variant->c_str());
  if (out->kernel == nullptr) {
    *error = builtin ? ""
                     : where + ": this build has no " + *device + " variant '" + *variant + "' of " + *op +
                           " (the file is stale: re-run fsattn-tune)";
    return false;
  }
  return true;
}

// "MAJOR.MINOR" of a version string "MAJOR.MINOR.PATCH" (the whole string if it has no patch).
std::string minor_release(const std::string &version) {
  const size_t first = version.find('.');
  const size_t second = first == std::string::npos ? first : version.find('.', first + 1);
  return version.substr(0, second);
}

// The table in `text`. A file (builtin false) must have been written by a library of this
// major and minor version (patch releases keep the kernels' names and meaning) and for this
// machine's devices; the built-in table serves every machine.
bool read_table(const std::string &text, const std::string &name, bool builtin, Table *out, std::string *error) {
  Json file;
  std::string why;
  if (!parse_json(text, &file, &why)) {
    *error = name + " is not valid JSON (" + why + ")";
    return false;
  }
  const std::string *format = string_member(file, "format"), *library = string_member(file, "library");
  const Json *entries = member(file, "entries");
  if (format == nullptr || *format != "fsattn-tuning-1") {
    *error = name + " is not an fsattn tuning file (\"format\" must be \"fsattn-tuning-1\")";
    return false;
  }
  if (!builtin && (library == nullptr || minor_release(*library) != minor_release(fsattn_version()))) {
    *error = name + " is stale: written for fsattn " + (library != nullptr ? *library : "(none)") +
             ", this is fsattn " + fsattn_version() + " (re-run fsattn-tune)";
    return false;
  }
  if (entries == nullptr || !entries->is_array()) {
    *error = name + ": \"entries\" must be an array";
    return false;
  }
  bool cpu = false, cuda = false;
  for (size_t i = 0; i < entries->size(); ++i) {
    Entry e{};
    if (!read_entry((*entries)[i], i, builtin, &e, &why)) {
      if (builtin && why.empty()) continue;
      *error = name + ": " + why;
      return false;
    }
    cpu |= e.device == FSATTN_DEVICE_CPU;
    cuda |= e.device == FSATTN_DEVICE_CUDA;
    out->entries.push_back(e);
  }
  // A file's measurements hold for the devices they were taken on.
  for (auto [present, key, device] :
       {std::tuple{cpu, "cpu", FSATTN_DEVICE_CPU}, std::tuple{cuda, "gpu", FSATTN_DEVICE_CUDA}}) {
    if (builtin || !present) continue;
    const std::string *v = string_member(file, key);
    const std::string here = device_name(device, nullptr);
    if (v == nullptr) {
      *error = name + ": \"" + key + "\" must name the device its entries were measured on";
      return false;
    }
    if (!here.empty() && *v != here) {
      *error = name + " is stale: tuned on " + *v + ", this machine has " + here + " (re-run fsattn-tune)";
      return false;
    }
  }
  const std::string gpu = gpu_of(file);
  out->info = (builtin ? std::string("built-in table") : name) + ", " + std::to_string(out->entries.size()) +
              " entries" + (gpu.empty() ? "" : ", measured on " + gpu);
  return true;
}

std::shared_ptr<const Table> builtin_table() {
  auto t = std::make_shared<Table>();
  std::string error;
  if (!read_table(kBuiltinTuning, "the built-in table", true, t.get(), &error)) {
    t->entries.clear();
    t->info = "no table (the built-in one is unreadable: " + error + ")";
  }
  return t;
}

std::mutex g_lock;
std::shared_ptr<const Table> g_table;  // NULL until the first use or load

// Replaces the table with the file at `path` (NULL: the built-in one). On failure the
// built-in table is used, and its description says why.
fsattn_status load(const char *path, bool from_environment) {
  std::shared_ptr<const Table> table = builtin_table();
  fsattn_status status = FSATTN_OK;
  std::string error;
  if (path != nullptr) {
    const std::string name = from_environment ? "FSATTN_TUNING=" + std::string(path) : std::string(path);
    std::ifstream in(path, std::ios::binary);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    auto t = std::make_shared<Table>();
    if (!in.is_open() || in.bad()) {
      error = name + " cannot be read";
    } else if (read_table(text, name, false, t.get(), &error)) {
      table = t;
    }
    if (!error.empty()) {
      auto fallback = std::make_shared<Table>(*table);
      fallback->info += "; " + error;
      table = fallback;
      // From the environment, at some call's first use of the table: that call's status and
      // message stay its own, and fsattn_tuning_info tells.
      if (!from_environment) {
        status = fail(FSATTN_ERROR_INVALID_ARGUMENT, "fsattn_load_tuning: " + error + "; the built-in table is used");
      }
    }
  }
  std::lock_guard<std::mutex> lock(g_lock);
  g_table = table;
  return status;
}

std::shared_ptr<const Table> table() {
  static std::once_flag environment;
  std::call_once(environment, [] {
    bool loaded;
    {
      std::lock_guard<std::mutex> lock(g_lock);
      loaded = g_table != nullptr;
    }
    if (!loaded) {
      const char *path = std::getenv("FSATTN_TUNING");
      load(path != nullptr && *path != '\0' ? path : nullptr, true);
    }
  });
  std::lock_guard<std::mutex> lock(g_lock);
  return g_table;
}

double log_distance(int64_t a, int64_t b) { return std::fabs(std::log2(double(a)) - std::log2(double(b))); }

}  // namespace

const Kernel *tuned_kernel(fsattn_op op, fsattn_device device, const CallShape &s) {
  const std::shared_ptr<const Table> t = table();
  const Entry *best = nullptr;
  double best_distance = 0.0;
  for (const Entry &e : t->entries) {
    if (e.op != op || e.device != device) continue;
    const CallShape &m = e.shape;
    // Shapes compare by their sizes' ratios: the batch-heads product (both run in parallel),
    // the sequence length, and the three feature sizes. The first of equal distances wins.
    const double d = log_distance(s.batch * s.heads, m.batch * m.heads) + log_distance(s.seqlen, m.seqlen) +
                     log_distance(s.dk, m.dk) + log_distance(s.dv, m.dv) + log_distance(s.features, m.features);
    if (best == nullptr || d < best_distance) {
      best = &e;
      best_distance = d;
    }
  }
  return best != nullptr && kernel_runs_here(*best->kernel) ? best->kernel : nullptr;
}

}  // namespace fsattn

extern "C" fsattn_status fsattn_load_tuning(const char *path) {
  return fsattn::guarded("fsattn_load_tuning", [&] {
    (void)fsattn::table();  // the environment's file, if any, is read first and then replaced
    return fsattn::load(path, false);
  });
}

extern "C" const char *fsattn_tuning_info(void) {
  thread_local std::string info;
  try {
    info = fsattn::table()->info;
  } catch (const std::bad_alloc &) {
    info = "(out of memory)";
  }
  return info.c_str();
}
