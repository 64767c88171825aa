// The tuning table: a file written for this machine picks the variant that calls without
// exec->variant run, by the nearest measured shape; a corrupt or stale file is refused with a
// message naming what is wrong, and the built-in table is used instead. The first test sees
// the file FSATTN_TUNING names (set before the library's first call, as a user would).
#include "cases.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include <unistd.h>

using namespace fsattn;
using namespace fsattn::test;

namespace {

const fsattn_exec kCpu{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, nullptr};

std::string temp_path(const std::string &name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/fsattn_tuning_test_" + std::to_string(getpid()) + "_" + name;
}

std::string write_file(const std::string &name, const std::string &text) {
  const std::string path = temp_path(name);
  std::ofstream(path) << text;
  return path;
}

// One entry: op on the CPU at batch B, seqlen T, heads 4, dk = dv = features = 16.
std::string entry(const char *op, const std::string &variant, int64_t B, int64_t T, const char *device = "cpu") {
  return std::string("{\"op\": \"") + op + "\", \"device\": \"" + device +
         "\", \"shape\": {\"batch\": " + std::to_string(B) + ", \"seqlen\": " + std::to_string(T) +
         ", \"heads\": 4, \"dk\": 16, \"dv\": 16, \"features\": 16}, \"variant\": \"" + variant + "\", \"ms\": {\"" +
         variant + "\": 1.5}}";
}

std::string table(const std::string &entries, const std::string &library = fsattn_version(),
                  const std::string &cpu = fsattn_device_name(FSATTN_DEVICE_CPU)) {
  return "{\"format\": \"fsattn-tuning-1\", \"library\": \"" + library + "\", \"cpu\": \"" + cpu +
         "\", \"entries\": [" + entries + "]}";
}

std::string release(int major, int minor, int patch) {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

const char *selected(fsattn_op op, int64_t B, int64_t T, const char *variant = nullptr) {
  const fsattn_exec exec{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, variant};
  const fsattn_dims dims{sizeof(fsattn_dims), B, T, 4, 16, 16, nullptr, 0};
  return fsattn_selected_variant(&exec, op, &dims, 16);
}

std::string default_variant(fsattn_op op) { return fsattn_variant_name(op, FSATTN_DEVICE_CPU, 0); }

// Written and named in FSATTN_TUNING before any call into the library (the file is read at
// the first use of the table); removed at exit.
struct EnvironmentFile {
  std::string path = write_file("env.json", table(entry("ida_forward", "cpu_c32", 1, 64)));
  EnvironmentFile() { setenv("FSATTN_TUNING", path.c_str(), 1); }
  ~EnvironmentFile() { std::remove(path.c_str()); }
};
const EnvironmentFile kEnvironmentFile;

TEST(Tuning, EnvironmentFileIsUsed) {
  EXPECT_NE(std::string(fsattn_tuning_info()).find(kEnvironmentFile.path), std::string::npos) << fsattn_tuning_info();
  EXPECT_STREQ(selected(FSATTN_OP_IDA_FORWARD, 1, 64), "cpu_c32");
  // No entry for the BLA forward in that file: its default.
  EXPECT_EQ(selected(FSATTN_OP_BLA_FORWARD, 1, 64), default_variant(FSATTN_OP_BLA_FORWARD));
}

TEST(Tuning, NearestShapeWins) {
  const std::string path = write_file(
      "nearest.json", table(entry("ida_forward", "cpu_c16", 1, 64) + ", " + entry("ida_forward", "cpu_c32", 8, 4096)));
  ASSERT_EQ(fsattn_load_tuning(path.c_str()), FSATTN_OK) << fsattn_last_error();
  EXPECT_STREQ(selected(FSATTN_OP_IDA_FORWARD, 1, 64), "cpu_c16");
  EXPECT_STREQ(selected(FSATTN_OP_IDA_FORWARD, 2, 100), "cpu_c16");
  EXPECT_STREQ(selected(FSATTN_OP_IDA_FORWARD, 4, 2048), "cpu_c32");
  EXPECT_STREQ(selected(FSATTN_OP_IDA_FORWARD, 64, 100000), "cpu_c32");
  // A variant named in the call is not overridden.
  EXPECT_STREQ(selected(FSATTN_OP_IDA_FORWARD, 1, 64, "cpu_c64"), "cpu_c64");
  EXPECT_NE(std::string(fsattn_tuning_info()).find("2 entries"), std::string::npos) << fsattn_tuning_info();
  std::remove(path.c_str());
  ASSERT_EQ(fsattn_load_tuning(nullptr), FSATTN_OK);
}

// A call without a variant runs the tuned one: the same bits as naming it.
TEST(Tuning, CallRunsTheTunedVariant) {
  const std::string path = write_file("call.json", table(entry("ida_forward", "cpu_c16", 2, 37)));
  ASSERT_EQ(fsattn_load_tuning(path.c_str()), FSATTN_OK) << fsattn_last_error();
  const IdaCase c = make_ida_case({2, 37, 4, 16, 16, 16}, 7, true);
  const ForwardResult tuned = run_ida_forward(c), named = run_ida_forward(c, "cpu_c16");
  ASSERT_EQ(tuned.status, FSATTN_OK);
  EXPECT_EQ(tuned.o, named.o);
  EXPECT_EQ(tuned.state_k, named.state_k);
  std::remove(path.c_str());
  ASSERT_EQ(fsattn_load_tuning(nullptr), FSATTN_OK);
}

struct BadFile {
  const char *name;
  std::string text;
  const char *message;  // a substring of the refusal
};

TEST(Tuning, BadFilesAreRefusedAndTheBuiltInTableUsed) {
  const std::string ok_entry = entry("ida_forward", "cpu_c16", 1, 64);
  const BadFile bad[] = {
      {"empty", "", "not valid JSON (line 1, column 1"},
      {"truncated", table(ok_entry).substr(0, 60), "not valid JSON"},
      {"trailing", table(ok_entry) + " x", "expected end of input"},
      {"deep", std::string(100, '[') + std::string(100, ']'), "nested more than 32 levels"},
      {"very_deep", std::string(100000, '[') + std::string(100000, ']'), "nested more than 32 levels"},
      {"nul", table(ok_entry) + std::string(1, '\0') + "x", "a NUL character"},
      {"not_tuning", "{\"entries\": []}", "not an fsattn tuning file"},
      {"stale_version", table(ok_entry, "0.0.0"), "stale: written for fsattn 0.0.0"},
      {"next_minor", table(ok_entry, release(FSATTN_VERSION_MAJOR, FSATTN_VERSION_MINOR + 1, 0)), "stale: written for"},
      {"next_major", table(ok_entry, release(FSATTN_VERSION_MAJOR + 1, FSATTN_VERSION_MINOR, 0)), "stale: written for"},
      {"other_cpu", table(ok_entry, fsattn_version(), "Some Other CPU"), "stale: tuned on Some Other CPU"},
      {"unknown_variant", table(entry("ida_forward", "cpu_c999", 1, 64)), "no cpu variant 'cpu_c999' of ida_forward"},
      {"unknown_op", table(entry("ida_sideways", "cpu_c16", 1, 64)), "entries[0]: \"op\""},
      {"bad_device", table(entry("ida_forward", "cpu_c16", 1, 64, "tpu")), "\"device\" must be"},
      {"zero_batch", table(entry("ida_forward", "cpu_c16", 0, 64)), "\"batch\" as a positive integer"},
      {"bad_escape", "{\"format\": \"fsattn-tuning-1\\q\"}", "forbidden character after backslash"},
  };
  for (const BadFile &b : bad) {
    SCOPED_TRACE(b.name);
    const std::string path = write_file(b.name, b.text);
    EXPECT_EQ(fsattn_load_tuning(path.c_str()), FSATTN_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(fsattn_last_error()).find(b.message), std::string::npos) << fsattn_last_error();
    EXPECT_NE(std::string(fsattn_tuning_info()).find("built-in table"), std::string::npos) << fsattn_tuning_info();
    EXPECT_NE(std::string(fsattn_tuning_info()).find(b.message), std::string::npos) << fsattn_tuning_info();
    std::remove(path.c_str());
  }
  EXPECT_EQ(fsattn_load_tuning(temp_path("missing").c_str()), FSATTN_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fsattn_last_error()).find("cannot be read"), std::string::npos);
  // Calls still run, on the built-in table.
  const IdaCase c = make_ida_case({1, 9, 2, 4, 4, 3}, 3, false);
  EXPECT_EQ(run_ida_forward(c).status, FSATTN_OK);
  ASSERT_EQ(fsattn_load_tuning(nullptr), FSATTN_OK);
  EXPECT_EQ(std::string(fsattn_tuning_info()).find(';'), std::string::npos) << fsattn_tuning_info();
}

// A file written by another patch release of the same major and minor version stays valid
// (its variants exist in this build), earlier or later.
TEST(Tuning, FilesOfOtherPatchReleasesLoad) {
  for (int patch : {FSATTN_VERSION_PATCH + 7, 0}) {
    const std::string path = write_file("patch", table(entry("ida_forward", "cpu_c32", 1, 64),
                                                       release(FSATTN_VERSION_MAJOR, FSATTN_VERSION_MINOR, patch)));
    EXPECT_EQ(fsattn_load_tuning(path.c_str()), FSATTN_OK) << fsattn_last_error();
    EXPECT_STREQ(selected(FSATTN_OP_IDA_FORWARD, 1, 64), "cpu_c32");
    std::remove(path.c_str());
  }
  ASSERT_EQ(fsattn_load_tuning(nullptr), FSATTN_OK);
}

// The built-in table names variants of this build only (entries for others are skipped), so
// whatever it picks is a compiled variant.
TEST(Tuning, BuiltInPicksCompiledVariants) {
  ASSERT_EQ(fsattn_load_tuning(nullptr), FSATTN_OK);
  for (fsattn_op op : {FSATTN_OP_IDA_FORWARD, FSATTN_OP_IDA_BACKWARD, FSATTN_OP_BLA_FORWARD, FSATTN_OP_BLA_BACKWARD}) {
    for (int64_t T : {1, 64, 4096, 65536}) {
      const char *v = selected(op, 2, T);
      ASSERT_NE(v, nullptr) << fsattn_last_error();
      bool compiled = false;
      for (const std::string &name : cpu_variants(op)) compiled |= name == v;
      EXPECT_TRUE(compiled) << v;
    }
  }
}

TEST(Tuning, SelectedVariantChecksItsArguments) {
  const fsattn_dims dims{sizeof(fsattn_dims), 1, 8, 2, 4, 4, nullptr, 0};
  EXPECT_EQ(fsattn_selected_variant(nullptr, FSATTN_OP_IDA_FORWARD, &dims, 4), nullptr);
  EXPECT_NE(std::string(fsattn_last_error()).find("exec"), std::string::npos);
  EXPECT_EQ(fsattn_selected_variant(&kCpu, FSATTN_OP_IDA_FORWARD, &dims, 0), nullptr);
  EXPECT_NE(std::string(fsattn_last_error()).find("features"), std::string::npos);
  EXPECT_EQ(fsattn_selected_variant(&kCpu, static_cast<fsattn_op>(99), &dims, 4), nullptr);
  EXPECT_NE(std::string(fsattn_last_error()).find("not an fsattn_op"), std::string::npos);
  const fsattn_exec unknown{sizeof(fsattn_exec), FSATTN_DEVICE_CPU, nullptr, "cpu_c999"};
  EXPECT_EQ(fsattn_selected_variant(&unknown, FSATTN_OP_IDA_FORWARD, &dims, 4), nullptr);
  EXPECT_NE(std::string(fsattn_last_error()).find("cpu_c999"), std::string::npos);
}

// A file fsattn-tune wrote (the ctest fixture fsattn_tune_writes_a_file; skipped without it):
// it loads, and each entry's variant is what a call at its shape runs.
TEST(Tuning, LoadsFsattnTuneOutput) {
  const char *path = std::getenv("FSATTN_TUNE_FILE");
  if (path == nullptr) GTEST_SKIP() << "FSATTN_TUNE_FILE is not set (ctest sets it)";
  ASSERT_EQ(fsattn_load_tuning(path), FSATTN_OK) << fsattn_last_error();
  std::ifstream in(path);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const nlohmann::json file = nlohmann::json::parse(text, nullptr, false);
  ASSERT_FALSE(file.is_discarded()) << text;
  const nlohmann::json shape = {{"batch", 1}, {"seqlen", 40}, {"heads", 2}, {"dk", 8}, {"dv", 8}, {"features", 4}};
  // The file has an entry for each tuned op with a choice in this build (several variants).
  size_t entries = 0;
  for (fsattn_op op : {FSATTN_OP_IDA_FORWARD, FSATTN_OP_IDA_BACKWARD, FSATTN_OP_BLA_FORWARD}) {
    if (cpu_variants(op, Schedules::kHand).size() < 2) continue;
    ++entries;
    const fsattn_dims dims{sizeof(fsattn_dims), 1, 40, 2, 8, 8, nullptr, 0};
    const char *v = fsattn_selected_variant(&kCpu, op, &dims, 4);
    ASSERT_NE(v, nullptr) << fsattn_last_error();
    const std::string name = fsattn_op_name(op);
    std::string chosen;  // at() throws, failing the test, where the file lacks a key
    for (const nlohmann::json &e : file.at("entries")) {
      if (e.at("op") == name && e.at("device") == "cpu" && e.at("shape") == shape)
        chosen = e.at("variant").get<std::string>();
    }
    EXPECT_EQ(chosen, v) << name << " runs " << v << ", not the file's choice:\n" << text;
  }
  EXPECT_NE(std::string(fsattn_tuning_info()).find(std::to_string(entries) + " entries"), std::string::npos)
      << fsattn_tuning_info();
  ASSERT_EQ(fsattn_load_tuning(nullptr), FSATTN_OK);
}

TEST(Tuning, OpNames) {
  EXPECT_STREQ(fsattn_op_name(FSATTN_OP_IDA_FORWARD), "ida_forward");
  EXPECT_STREQ(fsattn_op_name(FSATTN_OP_BLA_STEP), "bla_step");
  EXPECT_EQ(fsattn_op_name(static_cast<fsattn_op>(99)), nullptr);
  EXPECT_EQ(fsattn_op_name(static_cast<fsattn_op>(-1)), nullptr);
}

TEST(Tuning, DeviceNames) {
  const char *cpu = fsattn_device_name(FSATTN_DEVICE_CPU);
  ASSERT_NE(cpu, nullptr);
  EXPECT_GT(std::string(cpu).size(), 0u);
  EXPECT_EQ(fsattn_device_name(static_cast<fsattn_device>(7)), nullptr);
  EXPECT_NE(std::string(fsattn_last_error()).find("unknown device"), std::string::npos);
}

}  // namespace
