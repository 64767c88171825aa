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

const fsattn_op kTunedOps[] = {FSATTN_OP_IDA_FORWARD, FSATTN_OP_IDA_BACKWARD, FSATTN_OP_BLA_FORWARD,
                               FSATTN_OP_BLA_BACKWARD, FSATTN_OP_IDA_STEP, FSATTN_OP_BLA_STEP};

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

[[noreturn]] void usage(const std::string &why) {
  std::fprintf(stderr,
               "fsattn-tune: %s\n"
               "usage: fsattn-tune [--device cpu|cuda|all] [--op NAME]... [--shape B,T,H,DK,DV,F]...\n"
               "                   [--runs N] [--out FILE]\n"
               "  ops: ida_forward ida_backward bla_forward bla_backward ida_step bla_step\n"
               "  F: IDA modes or BLA slots. Defaults: every device present, every op, a shape set per\n"
               "  device, 10 runs on the GPU and 5 on the CPU, --out fsattn_tuning.json.\n",
               why.c_str());
  std::exit(2);
}

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") usage("times every variant and writes a tuning file");
    if (i + 1 >= argc) usage(a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--device") {
      if (v == "cpu" || v == "all") o.devices.push_back(FSATTN_DEVICE_CPU);
      if (v == "cuda" || v == "all") o.devices.push_back(FSATTN_DEVICE_CUDA);
      if (v != "cpu" && v != "cuda" && v != "all") usage("unknown device '" + v + "'");
    } else if (a == "--op") {
      bool found = false;
      for (fsattn_op op : kTunedOps) {
        if (v == fsattn_op_name(op)) o.ops.push_back(op), found = true;
      }
      if (!found) usage("unknown op '" + v + "'");
    } else if (a == "--shape") {
      OpShape s{};
      char tail = 0;
      if (std::sscanf(v.c_str(), "%ld,%ld,%ld,%ld,%ld,%ld%c", &s.batch, &s.seqlen, &s.heads, &s.dk, &s.dv,
                      &s.features, &tail) != 6 ||
          s.batch < 1 || s.seqlen < 1 || s.heads < 1 || s.dk < 1 || s.dv < 1 || s.features < 1) {
        usage("--shape takes six positive integers B,T,H,DK,DV,F, not '" + v + "'");
      }
      o.shapes.push_back(s);
    } else if (a == "--runs") {
      o.runs = std::atoi(v.c_str());
      if (o.runs < 1 || o.runs > 1000) usage("--runs takes 1 to 1000");
    } else if (a == "--out") {
      o.out = v;
    } else {
      usage("unknown option '" + a + "'");
    }
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

std::string json_string(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
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

bool write_file(const std::string &path, const std::vector<Result> &results) {
  std::ofstream f(path);
  f << "{\n  \"format\": \"fsattn-tuning-1\",\n  \"library\": " << json_string(fsattn_version()) << ",\n";
  f << "  \"cpu\": " << json_string(fsattn_device_name(FSATTN_DEVICE_CPU)) << ",\n";
  if (const char *gpu = fsattn_device_name(FSATTN_DEVICE_CUDA)) f << "  \"gpu\": " << json_string(gpu) << ",\n";
#ifdef FSATTN_BENCH_CUDA
  int version = 0;
  if (const cu::Driver *d = cu::driver(nullptr); d != nullptr && d->DriverGetVersion(&version) == cu::kSuccess) {
    f << "  \"cuda_driver\": \"" << version / 1000 << "." << version % 1000 / 10 << "\",\n";
  }
#endif
  f << "  \"written\": \"" << utc_now() << "\",\n  \"entries\": [";
  bool first = true;
  for (const Result &r : results) {
    if (r.best < 0) continue;
    const OpShape &s = r.shape;
    f << (first ? "\n" : ",\n") << "    {\"op\": \"" << fsattn_op_name(r.op) << "\", \"device\": \"" << device_key(r.device)
      << "\", \"shape\": {\"batch\": " << s.batch << ", \"seqlen\": " << s.seqlen << ", \"heads\": " << s.heads
      << ", \"dk\": " << s.dk << ", \"dv\": " << s.dv << ", \"features\": " << s.features << "},\n     \"variant\": \""
      << r.times[r.best].variant << "\", \"runs\": " << r.runs << ", \"ms\": {";
    bool first_time = true;
    for (const Timed &t : r.times) {
      if (t.ms < 0) continue;
      f << (first_time ? "" : ", ") << "\"" << t.variant << "\": " << ms_text(t.ms);
      first_time = false;
    }
    f << "}}";
    first = false;
  }
  f << "\n  ]\n}\n";
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
    std::fprintf(stderr, r.best < 0 ? " (no variant ran)\n" : " -> %s\n", r.best < 0 ? "" : r.times[r.best].variant.c_str());
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
