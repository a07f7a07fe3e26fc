// Target files: every shipped one loads, names and paths find the same file, and every kind of bad file
// is a one-line TargetError naming the file and the field (a silently wrong target would mis-tune).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <sys/wait.h>

#include "targets/target.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

const std::string kShippedDir = std::string(KILN_SOURCE_DIR) + "/targets";

const char* kGood = R"(description = "test target"
triple = "x86_64-unknown-linux-gnu"
cpu = "x86-64-v3"
features = "+avx2,+fma"
vector_bits = 256
cores = 8
cc = "cc"
run_prefix = ""

[cache]
l1d = 32768
l2 = 524288
l3 = 0
)";

std::string write(const testing::TempDir& dir, const std::string& file, const std::string& text) {
  std::ofstream(dir.path(file)) << text;
  return dir.path(file);
}

// Replaces the first occurrence of `from` in the good file by `to`.
std::string edited(const std::string& from, const std::string& to) {
  std::string s = kGood;
  auto at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

// Loading `text` fails with a one-line message that contains the file's path and every one of `parts`.
void expect_error(const std::string& text, std::initializer_list<std::string> parts) {
  testing::TempDir dir;
  std::string file = write(dir, "bad.toml", text);
  try {
    load_target(file);
    ADD_FAILURE() << "loaded without error: " << text;
  } catch (const TargetError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(file), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(Target, EveryShippedTargetLoads) {
  ScopedEnv env("KILN_TARGETS_DIR", kShippedDir);
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(kShippedDir)) {
    if (e.path().extension() != ".toml") continue;
    Target t = load_target(e.path().string());
    names.insert(t.name);
    EXPECT_FALSE(t.triple.empty()) << t.name;
    EXPECT_GT(t.cores, 0) << t.name;
    EXPECT_GT(t.l1d_bytes, 0) << t.name;
    EXPECT_EQ(t.gpu.has_value(), t.triple.starts_with("nvptx")) << t.name;  // GPU limits exactly for CUDA targets
    bool arm = t.triple.starts_with("aarch64"), cortex_m = t.triple.starts_with("thumbv7em");
    EXPECT_EQ(t.runs_natively(), !arm && !cortex_m) << t.name;
    EXPECT_EQ(t.cc == "aarch64-linux-gnu-gcc", arm) << t.name;
    EXPECT_EQ(t.bare_metal.has_value(), cortex_m) << t.name;  // a memory map exactly for boards
    if (cortex_m) {
      EXPECT_TRUE(t.cc.starts_with("arm-none-eabi-gcc ")) << t.name;
      EXPECT_TRUE(t.run_prefix.starts_with("qemu-system-arm ")) << t.name;
      EXPECT_EQ(t.vector_bits, 32) << t.name;
      EXPECT_EQ(t.cores, 1) << t.name;
    }
  }
  std::set<std::string> expected = {"x86_64-generic",     "x86_64-avx2",        "x86_64-avx2-vnni",   "x86_64-avx512",
                                    "x86_64-avx512-vnni",
                                    "aarch64-cortex-a72", "aarch64-cortex-a53", "aarch64-neoverse-n1",
                                    "cuda-sm75",          "cuda-sm80",          "cuda-sm90",
                                    "cortex-m4",          "cortex-m7"};
  for (const auto& n : expected) EXPECT_TRUE(names.count(n)) << n;

  auto listed = list_targets();
  ASSERT_EQ(listed.size(), names.size());
  for (size_t i = 1; i < listed.size(); ++i) EXPECT_LT(listed[i - 1].name, listed[i].name);

  Target avx512 = load_target("x86_64-avx512");
  EXPECT_EQ(avx512.vector_bits, 512);
  EXPECT_EQ(avx512.vector_lanes(4), 16);
  Target a72 = load_target("aarch64-cortex-a72");
  EXPECT_EQ(a72.cpu, "cortex-a72");
  EXPECT_EQ(a72.run_prefix, "qemu-aarch64 -L /usr/aarch64-linux-gnu");
  EXPECT_EQ(a72.l3_bytes, 0);
}

TEST(Target, NameAndPathFindTheSameFile) {
  ScopedEnv env("KILN_TARGETS_DIR", kShippedDir);
  Target by_name = load_target("x86_64-avx2");
  Target by_path = load_target(kShippedDir + "/x86_64-avx2.toml");
  EXPECT_EQ(by_name.name, "x86_64-avx2");
  EXPECT_EQ(by_path.name, "x86_64-avx2");
  EXPECT_EQ(by_name.triple, by_path.triple);
  EXPECT_EQ(by_name.features, by_path.features);
  EXPECT_EQ(by_name.vector_bits, 256);
  EXPECT_EQ(by_name.features, "+avx2,+fma,+f16c");
}

TEST(Target, EnvironmentOverridesTheTargetsDirectory) {
  testing::TempDir dir;
  write(dir, "mine.toml", kGood);
  ScopedEnv env("KILN_TARGETS_DIR", std::filesystem::path(dir.path("mine.toml")).parent_path().string());
  EXPECT_EQ(targets_dir(), std::filesystem::path(dir.path("x")).parent_path().string());
  Target t = load_target("mine");
  EXPECT_EQ(t.description, "test target");
  EXPECT_EQ(t.l3_bytes, 0);
  ASSERT_EQ(list_targets().size(), 1u);
  EXPECT_THROW(load_target("x86_64-avx2"), TargetError);  // the shipped directory is no longer searched
}

TEST(Target, GpuLimitsAreOptional) {
  testing::TempDir dir;
  std::string file =
      write(dir, "gpu.toml", std::string(kGood) + "\n[gpu]\nshared_memory = 49152\nthreads_per_block = 1024\nwarp_size = 32\n");
  Target t = load_target(file);
  ASSERT_TRUE(t.gpu);
  EXPECT_EQ(t.gpu->shared_memory_bytes, 49152);
  EXPECT_EQ(t.gpu->max_threads_per_block, 1024);
  EXPECT_EQ(t.gpu->warp_size, 32);
  expect_error(std::string(kGood) + "\n[gpu]\nshared_memory = 49152\nwarp_size = 32\n", {"gpu.threads_per_block", "missing"});
}

const char* kBareMetal = R"(
[bare_metal]
flash_origin = 0x08000000
flash_bytes = 0x100000
sram_origin = 0x20000000
sram_bytes = 0x40000
stack_bytes = 0x2000
)";

TEST(Target, BareMetalMemoryIsOptional) {
  testing::TempDir dir;
  EXPECT_FALSE(load_target(write(dir, "plain.toml", kGood)).bare_metal);
  Target t = load_target(write(dir, "board.toml", std::string(kGood) + kBareMetal));
  ASSERT_TRUE(t.bare_metal);
  EXPECT_EQ(t.bare_metal->flash_origin, 0x08000000);
  EXPECT_EQ(t.bare_metal->flash_bytes, 0x100000);
  EXPECT_EQ(t.bare_metal->sram_origin, 0x20000000);
  EXPECT_EQ(t.bare_metal->sram_bytes, 0x40000);
  EXPECT_EQ(t.bare_metal->stack_bytes, 0x2000);
  EXPECT_FALSE(t.runs_natively());  // a board's binaries run on an emulator or the board
  // A core without float SIMD says 32 bits: one lane.
  EXPECT_EQ(load_target(write(dir, "scalar.toml", edited("vector_bits = 256", "vector_bits = 32"))).vector_lanes(4), 1);
}

TEST(Target, BadBareMetalMemoryIsNamed) {
  auto with = [](const std::string& from, const std::string& to) {
    std::string s = std::string(kGood) + kBareMetal;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  expect_error(with("stack_bytes = 0x2000\n", ""), {"missing field 'bare_metal.stack_bytes'"});
  expect_error(with("sram_bytes = 0x40000", "sram_bytes = 0x40000\nheap = 1"), {"unknown field 'bare_metal.heap'"});
  expect_error(with("sram_origin = 0x20000000", "sram_origin = 0x08080000"), {"'bare_metal.sram_origin'", "overlaps flash"});
  expect_error(with("stack_bytes = 0x2000", "stack_bytes = 0x80000"), {"'bare_metal.stack_bytes'", "out of range"});
  expect_error(with("flash_origin = 0x08000000", "flash_origin = 0x100000000"), {"'bare_metal.flash_origin'", "out of range"});
  expect_error(with("flash_bytes = 0x100000", "flash_bytes = 0xF8000001"), {"'bare_metal.flash_bytes'", "out of range"});
  expect_error(std::string(kGood) + "\n[gpu]\nshared_memory = 1\nthreads_per_block = 1\nwarp_size = 1\n" + kBareMetal,
               {"'bare_metal'", "not both"});
}

TEST(Target, FusedMultiplyAddIsOptionalAndOffByDefault) {
  testing::TempDir dir;
  EXPECT_FALSE(load_target(write(dir, "plain.toml", kGood)).fused_multiply_add);
  EXPECT_TRUE(load_target(write(dir, "fma.toml", edited("cores = 8", "cores = 8\nfused_multiply_add = true")))
                  .fused_multiply_add);
}

TEST(Target, HugePageBytesIsOptionalAndAPowerOfTwo) {
  testing::TempDir dir;
  EXPECT_EQ(load_target(write(dir, "plain.toml", kGood)).huge_page_bytes, 0);
  EXPECT_EQ(load_target(write(dir, "huge.toml", edited("cores = 8", "cores = 8\nhuge_page_bytes = 2097152"))).huge_page_bytes,
            2097152);
  expect_error(edited("cores = 8", "cores = 8\nhuge_page_bytes = 3000000"), {"'huge_page_bytes'", "power of two"});
  expect_error(edited("cores = 8", "cores = 8\nhuge_page_bytes = 1024"), {"'huge_page_bytes'", "at least 4096"});
  expect_error(edited("cores = 8", "cores = 8\nhuge_page_bytes = -1"), {"'huge_page_bytes'", "out of range"});
  expect_error(edited("cores = 8", "cores = 8\nhuge_page_bytes = \"2M\""), {"'huge_page_bytes'", "expected an integer"});
}

TEST(Target, UnknownNameNamesTheFileLookedFor) {
  ScopedEnv env("KILN_TARGETS_DIR", kShippedDir);
  try {
    load_target("nope");
    FAIL();
  } catch (const TargetError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'nope'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(kShippedDir + "/nope.toml"), std::string::npos) << msg;
    EXPECT_NE(msg.find("x86_64-avx512"), std::string::npos) << msg;  // lists what exists
  }
}

TEST(Target, MissingFileNamesTheFile) {
  testing::TempDir dir;
  std::string file = dir.path("absent.toml");
  try {
    load_target(file);
    FAIL();
  } catch (const TargetError& e) {
    EXPECT_NE(std::string(e.what()).find(file), std::string::npos) << e.what();
  }
}

TEST(Target, MissingFieldIsNamed) {
  expect_error(edited("cpu = \"x86-64-v3\"\n", ""), {"missing field 'cpu'"});
  expect_error(edited("l2 = 524288\n", ""), {"missing field 'cache.l2'"});
  expect_error(edited("[cache]", "[cachex]"), {"'cachex'"});  // unknown key comes first
  expect_error(edited("run_prefix = \"\"\n", ""), {"missing field 'run_prefix'"});
}

TEST(Target, WrongTypeIsNamed) {
  expect_error(edited("cores = 8", "cores = \"8\""), {"'cores'", "expected an integer", "string"});
  expect_error(edited("cores = 8", "cores = 8.0"), {"'cores'", "floating-point"});
  expect_error(edited("triple = \"x86_64-unknown-linux-gnu\"", "triple = 1"), {"'triple'", "expected a string"});
  expect_error(edited("l1d = 32768", "l1d = [32768]"), {"'cache.l1d'", "an array"});
  expect_error(edited("cores = 8", "cores = 8\ngpu = 1"), {"'gpu'", "expected a table"});
  expect_error(edited("cores = 8", "cores = 8\nfused_multiply_add = 1"),
               {"'fused_multiply_add'", "expected true or false", "integer"});
}

TEST(Target, UnknownKeyIsNamed) {
  expect_error(edited("cores = 8", "cores = 8\nvectorbits = 256"), {"unknown field 'vectorbits'"});
  expect_error(edited("l3 = 0", "l3 = 0\nl4 = 1"), {"unknown field 'cache.l4'"});
}

TEST(Target, BadValuesAreNamed) {
  expect_error(edited("vector_bits = 256", "vector_bits = 384"), {"'vector_bits'", "unknown vector width 384"});
  expect_error(edited("vector_bits = 256", "vector_bits = 0"), {"'vector_bits'"});
  expect_error(edited("cores = 8", "cores = 0"), {"'cores'", "out of range"});
  expect_error(edited("l1d = 32768", "l1d = -1"), {"'cache.l1d'"});
  expect_error(edited("+avx2,+fma", "avx2"), {"'features'", "avx2"});
  expect_error(edited("cc = \"cc\"", "cc = \"\""), {"'cc'", "empty"});
  expect_error(edited("cores = 8", "cores = 8\ncores = 9"), {"TOML syntax error"});
}

TEST(Target, HostIsAnX86Target) {
#if defined(__x86_64__)
  ScopedEnv env("KILN_TARGETS_DIR", kShippedDir);
  auto name = host_target_name();
  ASSERT_TRUE(name);
  EXPECT_TRUE(*name == "x86_64-avx512-vnni" || *name == "x86_64-avx512" || *name == "x86_64-avx2-vnni" ||
              *name == "x86_64-avx2" || *name == "x86_64-generic")
      << *name;
  EXPECT_EQ(host_target().name, *name);
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512vl")) {
    EXPECT_EQ(*name, __builtin_cpu_supports("avx512vnni") ? "x86_64-avx512-vnni" : "x86_64-avx512");
  }
#else
  GTEST_SKIP() << "host detection covers x86-64 only";
#endif
}

// The host target must be one this CPU runs: every feature its file enables, and the ISA level of its
// LLVM CPU, are in /proc/cpuinfo's flags. The compiled conformance tests target the host, so a wrong
// answer here would make them fail with SIGILL; this says why.
TEST(Target, HostTargetRunsOnThisCpu) {
#if defined(__x86_64__)
  ScopedEnv env("KILN_TARGETS_DIR", kShippedDir);
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(cpuinfo, line))
    if (line.rfind("flags", 0) == 0) {
      flags = " " + line.substr(line.find(':') + 1) + " ";
      break;
    }
  if (flags.empty()) GTEST_SKIP() << "no /proc/cpuinfo flags to compare with";
  const Target host = host_target();
  std::vector<std::string> needed;
  std::stringstream features(host.features);
  // LLVM's feature names, where /proc/cpuinfo spells them otherwise.
  const std::map<std::string, std::string> cpuinfo_name{{"avx512vnni", "avx512_vnni"}, {"avxvnni", "avx_vnni"}};
  for (std::string f; std::getline(features, f, ',');)
    if (!f.empty() && f[0] == '+') {
      auto it = cpuinfo_name.find(f.substr(1));
      needed.push_back(it == cpuinfo_name.end() ? f.substr(1) : it->second);
    }
  const std::map<std::string, std::vector<std::string>> level{
      {"x86-64", {"sse2"}},
      {"x86-64-v3", {"avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "movbe"}},
      {"x86-64-v4", {"avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "movbe", "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}}};
  ASSERT_TRUE(level.count(host.cpu)) << "host target " << host.name << " has CPU " << host.cpu;
  for (const std::string& f : level.at(host.cpu)) needed.push_back(f);
  for (const std::string& f : needed)
    EXPECT_NE(flags.find(" " + f + " "), std::string::npos) << "host target " << host.name << " needs " << f;
#else
  GTEST_SKIP() << "host detection covers x86-64 only";
#endif
}

// Runs the driver; returns its exit code and puts stdout / stderr in `out` / `err`.
int run_kiln(const std::string& args, std::string& out, std::string& err) {
  testing::TempDir dir;
  std::string cmd = std::string(KILN_BINARY) + " " + args + " >" + dir.path("out") + " 2>" + dir.path("err");
  int status = std::system(cmd.c_str());
  auto slurp = [](const std::string& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  out = slurp(dir.path("out"));
  err = slurp(dir.path("err"));
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(TargetCli, ListsEveryTargetAndRejectsUnknownOnes) {
  ScopedEnv env("KILN_TARGETS_DIR", kShippedDir);
  std::string out, err;
  ASSERT_EQ(run_kiln("targets", out, err), 0) << err;
  for (const auto& t : list_targets()) EXPECT_NE(out.find(t.name), std::string::npos) << out;
  EXPECT_NE(out.find("triple"), std::string::npos) << out;

  ASSERT_EQ(run_kiln("targets aarch64-neoverse-n1", out, err), 0) << err;
  EXPECT_NE(out.find("neoverse-n1"), std::string::npos) << out;
  EXPECT_NE(out.find("qemu-aarch64"), std::string::npos) << out;

  EXPECT_EQ(run_kiln("targets nope", out, err), 2);
  EXPECT_TRUE(out.empty()) << out;
  ASSERT_FALSE(err.empty());
  EXPECT_EQ(err.find('\n'), err.size() - 1) << err;  // exactly one line
  EXPECT_NE(err.find("nope"), std::string::npos) << err;
}

}  // namespace
}  // namespace kiln
