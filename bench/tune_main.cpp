// fsattn-tune: times every hand-scheduled variant of every kernel, on the CPU and on the GPU,
// at the shapes given (or a default set), and writes a tuning file: for each op, device and
// shape, the fastest variant and every variant's time. The runtime loads the file
// (FSATTN_TUNING=path, or fsattn_load_tuning) and dispatches calls by it (fsattn.h).
//
//   fsattn-tune [--device cpu|cuda|all] [--op NAME]... [--shape B,T,H,DK,DV,F]...
//               [--runs N] [--out FILE]
//
// F is the IDA modes or BLA slots. Progress goes to stderr, the table of gains to stdout.
// The autoscheduled baselines are not candidates: they serve only the benchmark's sizes.
#include "op_calls.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace fsattn;
using namespace fsattn::bench;

namespace {

struct Options {
  std::vector<fsattn_device> devices;
  std::vector<fsattn_op> ops;
  std::vector<OpShape> shapes;  // empty: the default set
  int runs = 0;                 // 0: the device's default
  std::string out = "fsattn_tuning.json";
};

const fsattn_op kTunedOps[] = {FSATTN_OP_IDA_FORWARD,  FSATTN_OP_IDA_BACKWARD, FSATTN_OP_BLA_FORWARD,
                               FSATTN_OP_BLA_BACKWARD, FSATTN_OP_IDA_STEP,     FSATTN_OP_BLA_STEP};

const char *device_key(fsattn_device d) { return d == FSATTN_DEVICE_CUDA ? "cuda" : "cpu"; }
bool is_step(fsattn_op op) { return op == FSATTN_OP_IDA_STEP || op == FSATTN_OP_BLA_STEP; }

// The default shapes (D = 64, 64 modes or slots): scans from a short prompt to the training
// shape of docs/performance.md (B=8, T=4096, H=16; the CPU stops at a quarter of it); steps at 1,
// 16, 64 and 256 sequences of 32 heads (the one-kernel IDA step is the faster up to about
// 16 sequences, the per-state kernels from 64 on, H200).
std::vector<OpShape> default_shapes(fsattn_device device, fsattn_op op) {
  if (is_step(op)) {
    return {{1, 1, 32, 64, 64, 64}, {16, 1, 32, 64, 64, 64}, {64, 1, 32, 64, 64, 64}, {256, 1, 32, 64, 64, 64}};
  }
  if (device == FSATTN_DEVICE_CUDA) {
    return {{1, 1024, 8, 64, 64, 64}, {2, 2048, 4, 64, 64, 64}, {8, 4096, 16, 64, 64, 64}, {2, 16384, 16, 64, 64, 64}};
  }
  return {{1, 512, 4, 64, 64, 64}, {2, 2048, 4, 64, 64, 64}, {4, 4096, 8, 64, 64, 64}};
}

std::vector<std::string> candidates(fsattn_op op, fsattn_device device) {
  return test::variants(op, device, test::Schedules::kHand);
}

// "B,T,H,DK,DV,F" as six positive integers.
bool parse_shape(const std::string &text, OpShape *s) {
  char tail = 0;
  return std::sscanf(text.c_str(), "%ld,%ld,%ld,%ld,%ld,%ld%c", &s->batch, &s->seqlen, &s->heads, &s->dk, &s->dv,
                     &s->features, &tail) == 6 &&
         s->batch >= 1 && s->seqlen >= 1 && s->heads >= 1 && s->dk >= 1 && s->dv >= 1 && s->features >= 1;
}

// The command line; a bad one exits with status 2 and a message, --help with 0.
Options parse(int argc, char **argv) {
  Options o;
  std::vector<std::string> devices, ops, shapes;
  std::vector<std::string> op_names;
  for (fsattn_op op : kTunedOps) op_names.push_back(fsattn_op_name(op));

  CLI::App app{"fsattn-tune: times every hand-scheduled variant of each op and writes a tuning file"};
  app.footer("F is the IDA modes or BLA slots.");
  app.add_option("--device", devices, "cpu, cuda or all, repeatable (default: every device present)")
      ->check(CLI::IsMember({"cpu", "cuda", "all"}));
  app.add_option("--op", ops, "an op to tune, repeatable (default: every op)")->check(CLI::IsMember(op_names));
  app.add_option("--shape", shapes, "B,T,H,DK,DV,F to time at, repeatable (default: a set per device)")
      ->check([](const std::string &v) {
        OpShape s{};
        return parse_shape(v, &s) ? std::string() : "takes six positive integers B,T,H,DK,DV,F, not '" + v + "'";
      });
  app.add_option("--runs", o.runs, "timed calls per variant, 1 to 1000 (default: 10 on the GPU, 5 on the CPU)")
      ->check(CLI::Range(1, 1000))
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--out", o.out, "the tuning file to write")
      ->capture_default_str()
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    std::exit(app.exit(e) == 0 ? 0 : 2);  // app.exit prints the help or the error
  }

  for (const std::string &d : devices) {
    if (d == "cpu" || d == "all") o.devices.push_back(FSATTN_DEVICE_CPU);
    if (d == "cuda" || d == "all") o.devices.push_back(FSATTN_DEVICE_CUDA);
  }
  for (const std::string &name : ops) {
    for (fsattn_op op : kTunedOps) {
      if (name == fsattn_op_name(op)) o.ops.push_back(op);
    }
  }
  for (const std::string &text : shapes) {
    OpShape s{};
    parse_shape(text, &s);  // checked above
    o.shapes.push_back(s);
  }
  if (o.ops.empty()) o.ops.assign(std::begin(kTunedOps), std::end(kTunedOps));
  if (o.devices.empty()) {
    o.devices.push_back(FSATTN_DEVICE_CPU);
    if (fsattn_device_name(FSATTN_DEVICE_CUDA) != nullptr) o.devices.push_back(FSATTN_DEVICE_CUDA);
  }
  return o;
}

struct Timed {
  std::string variant;
  double ms;  // < 0: the call failed
  std::string error;
};

struct Result {
  fsattn_op op;
  fsattn_device device;
  OpShape shape;
  int runs;                  // timed calls per variant (their median is kept)
  std::vector<Timed> times;  // in the kernel table's order: the first is the default
  int best = -1;
};

std::string shape_text(const OpShape &s) {
  std::ostringstream t;
  t << "B=" << s.batch << " T=" << s.seqlen << " H=" << s.heads << " dk=" << s.dk << " dv=" << s.dv
    << " F=" << s.features;
  return t.str();
}

std::string utc_now() {
  char buf[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", ms);
  return buf;
}

// The tuning file (docs/tuning.md): its keys in this order, the times rounded as printed.
bool write_file(const std::string &path, const std::vector<Result> &results) {
  using Json = nlohmann::ordered_json;  // keeps the keys in insertion order
  Json file;
  file["format"] = "fsattn-tuning-1";
  file["library"] = fsattn_version();
  if (const char *cpu = fsattn_device_name(FSATTN_DEVICE_CPU)) file["cpu"] = cpu;
  if (const char *gpu = fsattn_device_name(FSATTN_DEVICE_CUDA)) file["gpu"] = gpu;
#ifdef FSATTN_BENCH_CUDA
  int version = 0;
  if (const cu::Driver *d = cu::driver(nullptr); d != nullptr && d->DriverGetVersion(&version) == cu::kSuccess) {
    file["cuda_driver"] = std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
  }
#endif
  file["written"] = utc_now();
  Json entries = Json::array();
  for (const Result &r : results) {
    if (r.best < 0) continue;
    const OpShape &s = r.shape;
    Json ms = Json::object();
    for (const Timed &t : r.times) {
      if (t.ms >= 0) ms[t.variant] = std::strtod(ms_text(t.ms).c_str(), nullptr);
    }
    entries.push_back({{"op", fsattn_op_name(r.op)},
                       {"device", device_key(r.device)},
                       {"shape",
                        {{"batch", s.batch},
                         {"seqlen", s.seqlen},
                         {"heads", s.heads},
                         {"dk", s.dk},
                         {"dv", s.dv},
                         {"features", s.features}}},
                       {"variant", r.times[r.best].variant},
                       {"runs", r.runs},
                       {"ms", ms}});
  }
  file["entries"] = entries;
  // replace: a name with bytes that are not UTF-8 (a CPU model string) is written, not thrown.
  std::ofstream f(path);
  f << file.dump(2, ' ', false, Json::error_handler_t::replace) << "\n";
  return bool(f);
}

}  // namespace

int main(int argc, char **argv) {
  const Options o = parse(argc, argv);
  struct Job {
    fsattn_op op;
    fsattn_device device;
    OpShape shape;
  };
  std::vector<Job> jobs;
  for (fsattn_device device : o.devices) {
    if (device == FSATTN_DEVICE_CUDA && fsattn_device_name(FSATTN_DEVICE_CUDA) == nullptr) {
      std::fprintf(stderr, "fsattn-tune: no GPU: %s\n", fsattn_last_error());
      return 1;
    }
    for (fsattn_op op : o.ops) {
      const size_t n = candidates(op, device).size();
      if (n < 2) {
        std::fprintf(stderr, "%s on %s: %zu variant%s, nothing to choose\n", fsattn_op_name(op), device_key(device), n,
                     n == 1 ? "" : "s");
        continue;
      }
      const std::vector<OpShape> shapes = o.shapes.empty() ? default_shapes(device, op) : o.shapes;
      for (const OpShape &s : shapes) jobs.push_back({op, device, s});
    }
  }
  std::vector<Result> results;
  for (size_t j = 0; j < jobs.size(); ++j) {
    const Job &job = jobs[j];
    const int runs = o.runs > 0 ? o.runs : job.device == FSATTN_DEVICE_CUDA ? 10 : 5;
    Result r{job.op, job.device, job.shape, runs, {}, -1};
    if (is_step(job.op)) r.shape.seqlen = 1;
    std::fprintf(stderr, "[%zu/%zu] %s %s %s:", j + 1, jobs.size(), fsattn_op_name(job.op), device_key(job.device),
                 shape_text(r.shape).c_str());
    for (const std::string &v : candidates(job.op, job.device)) {
      fsattn_status status = FSATTN_OK;
      Timed t{v, -1.0, ""};
      {
        auto call = prepare(job.op, job.device, v.c_str(), r.shape);
        t.ms = median_ms(job.device, call->run, runs, 1, &status);
      }
      if (status != FSATTN_OK) t.error = fsattn_last_error();
      std::fprintf(stderr, " %s %s", v.c_str(), t.ms < 0 ? "failed" : (ms_text(t.ms) + " ms").c_str());
      if (t.ms >= 0 && (r.best < 0 || t.ms < r.times[r.best].ms)) r.best = int(r.times.size());
      r.times.push_back(t);
    }
    std::fprintf(stderr, r.best < 0 ? " (no variant ran)\n" : " -> %s\n",
                 r.best < 0 ? "" : r.times[r.best].variant.c_str());
    for (const Timed &t : r.times) {
      if (!t.error.empty()) std::fprintf(stderr, "    %s: %s\n", t.variant.c_str(), t.error.c_str());
    }
    results.push_back(r);
  }
  if (!write_file(o.out, results)) {
    std::fprintf(stderr, "fsattn-tune: cannot write %s\n", o.out.c_str());
    return 1;
  }
  // The gain of tuning: the default variant's time over the fastest one's.
  std::printf("| op | device | shape | default | ms | tuned | ms | gain |\n|---|---|---|---|---|---|---|---|\n");
  for (const Result &r : results) {
    if (r.best < 0) continue;
    const Timed &d = r.times.front(), &b = r.times[r.best];
    std::printf("| %s | %s | %s | %s | %s | %s | %s | %s |\n", fsattn_op_name(r.op), device_key(r.device),
                shape_text(r.shape).c_str(), d.variant.c_str(), d.ms < 0 ? "failed" : ms_text(d.ms).c_str(),
                b.variant.c_str(), ms_text(b.ms).c_str(), d.ms < 0 ? "-" : (ms_text(d.ms / b.ms) + "x").c_str());
  }
  std::fprintf(stderr, "wrote %s\n", o.out.c_str());
  return 0;
}
