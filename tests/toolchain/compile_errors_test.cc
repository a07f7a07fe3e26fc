// Bad input for `kiln compile`: each case must exit 2 with exactly one line on stderr naming the file or
// field at fault, and leave nothing behind: no package files and no half-written temporary directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/frontend/test_models.h"

namespace kiln {
namespace {
namespace fs = std::filesystem;

const std::string kModel = std::string(KILN_SOURCE_DIR) + "/examples/tiny_cnn.onnx";

using testing::CliResult;
using testing::run_kiln;

// Every entry under `dir` (recursively), except the test's own stderr capture and `keep`.
std::vector<std::string> entries(const std::string& dir, const std::vector<std::string>& keep = {}) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::string rel = fs::relative(it->path(), dir).string();
    if (rel != "stderr.txt" && std::find(keep.begin(), keep.end(), rel) == keep.end()) out.push_back(rel);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Runs `kiln compile ARGS`, checks the error contract, and returns the message.
std::string expect_compile_error(const std::string& args, const testing::TempDir& dir, const std::string& names) {
  CliResult r = run_kiln("compile " + args, dir);
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find(names), std::string::npos) << "the message does not name '" << names << "': " << r.stderr_text;
  return r.stderr_text;
}

TEST(CompileErrors, UnknownTarget) {
  testing::TempDir dir;
  std::string msg = expect_compile_error(kModel + " --target no-such-board -o " + dir.path("pkg"), dir, "no-such-board");
  EXPECT_NE(msg.find("unknown target"), std::string::npos) << msg;
  EXPECT_EQ(entries(dir.path("")), std::vector<std::string>{});
}

TEST(CompileErrors, TargetFileWithAMissingField) {
  testing::TempDir dir;
  // A shipped target without its `cpu` line.
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/targets/x86_64-generic.toml");
  std::ofstream out(dir.path("no_cpu.toml"));
  bool dropped = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("cpu ", 0) == 0 || line.rfind("cpu=", 0) == 0) {
      dropped = true;
      continue;
    }
    out << line << "\n";
  }
  out.close();
  ASSERT_TRUE(dropped) << "x86_64-generic.toml has no cpu line to drop";
  std::string msg = expect_compile_error(kModel + " --target " + dir.path("no_cpu.toml") + " -o " + dir.path("pkg"), dir,
                                         dir.path("no_cpu.toml"));
  EXPECT_NE(msg.find("missing field 'cpu'"), std::string::npos) << msg;
  EXPECT_EQ(entries(dir.path(""), {"no_cpu.toml"}), std::vector<std::string>{});
}

TEST(CompileErrors, OutputDirectoryThroughARegularFile) {
  testing::TempDir dir;
  std::ofstream(dir.path("plain_file")) << "not a directory\n";
  std::string pkg = dir.path("plain_file") + "/pkg";
  expect_compile_error(kModel + " -o " + pkg, dir, pkg);
  EXPECT_EQ(entries(dir.path(""), {"plain_file"}), std::vector<std::string>{});
  std::ifstream in(dir.path("plain_file"));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "not a directory\n");
}

TEST(CompileErrors, OutputDirectoryIsARegularFile) {
  testing::TempDir dir;
  std::ofstream(dir.path("plain_file")) << "not a directory\n";
  expect_compile_error(kModel + " -o " + dir.path("plain_file"), dir, dir.path("plain_file"));
  // The package was written into a sibling temporary directory first: it must be gone.
  EXPECT_EQ(entries(dir.path(""), {"plain_file"}), std::vector<std::string>{});
  std::ifstream in(dir.path("plain_file"));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "not a directory\n");
}

TEST(CompileErrors, OutputDirectoryUnderAReadOnlyDirectory) {
  if (geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories";
  testing::TempDir dir;
  fs::create_directory(dir.path("locked"));
  fs::permissions(dir.path("locked"), fs::perms::owner_read | fs::perms::owner_exec);
  std::string pkg = dir.path("locked") + "/pkg";
  expect_compile_error(kModel + " -o " + pkg, dir, pkg);
  std::vector<std::string> left = entries(dir.path(""), {"locked"});
  fs::permissions(dir.path("locked"), fs::perms::owner_all);  // so that TempDir can remove it
  EXPECT_EQ(left, std::vector<std::string>{});
}

TEST(CompileErrors, ExistingReadOnlyOutputDirectoryIsLeftAlone) {
  if (geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories";
  testing::TempDir dir;
  fs::create_directory(dir.path("pkg"));
  std::ofstream(dir.path("pkg/README")) << "mine\n";
  fs::permissions(dir.path("pkg"), fs::perms::owner_read | fs::perms::owner_exec);
  expect_compile_error(kModel + " -o " + dir.path("pkg"), dir, dir.path("pkg"));
  std::vector<std::string> left = entries(dir.path(""), {"pkg", "pkg/README"});
  fs::permissions(dir.path("pkg"), fs::perms::owner_all);
  EXPECT_EQ(left, std::vector<std::string>{});
}

TEST(CompileErrors, UnboundSymbolicDimension) {
  testing::TempDir dir;
  ModelBuilder b("sym", 13);
  b.input("tokens", DType::Float32, std::vector<Dim>{{-1, "seq"}});
  b.node("Relu", {"tokens"}, {"y"});
  b.output("y", DType::Float32, Shape{});
  b.save(dir.path("sym.onnx"));
  std::string msg = expect_compile_error(dir.path("sym.onnx") + " -o " + dir.path("pkg"), dir, dir.path("sym.onnx"));
  EXPECT_NE(msg.find("'tokens'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--dim seq=N"), std::string::npos) << msg;
  EXPECT_EQ(entries(dir.path(""), {"sym.onnx"}), std::vector<std::string>{});
  // Bound, the same model compiles.
  CliResult ok = run_kiln("compile " + dir.path("sym.onnx") + " --dim seq=4 -o " + dir.path("pkg"), dir);
  EXPECT_EQ(ok.exit_code, 0) << ok.stderr_text;
  EXPECT_TRUE(fs::exists(dir.path("pkg/libsym.a")));
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// CUDA targets: a missing CUDA toolkit is named (ptxas and where it was looked for), and schedules
// that do not exist for GPUs yet are refused; neither leaves a package behind.
TEST(CompileErrors, CudaTargetWithoutTheToolkitNamesPtxas) {
  testing::TempDir dir;
  setenv("KILN_CUDA_ROOT", dir.path("no-cuda").c_str(), 1);
  std::string msg = expect_compile_error(kModel + " --target cuda-sm90 -o " + dir.path("pkg"), dir, "ptxas");
  unsetenv("KILN_CUDA_ROOT");
  EXPECT_NE(msg.find(dir.path("no-cuda")), std::string::npos) << msg;
  EXPECT_NE(msg.find("sm_90"), std::string::npos) << msg;
  EXPECT_EQ(entries(dir.path("")), std::vector<std::string>{});
}

// A CUDA target compiles with records (their gpu_tile steps); a records file that is not there is
// named, and nothing is written.
TEST(CompileErrors, CudaTargetWithMissingRecordsNamesTheFile) {
  testing::TempDir dir;
  expect_compile_error(kModel + " --target cuda-sm90 --records " + dir.path("tune.jsonl") + " -o " + dir.path("pkg"), dir,
                       "tune.jsonl");
  EXPECT_EQ(entries(dir.path("")), std::vector<std::string>{});
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// Gather with constant indices out of range: compiled code clamps indices to stay in bounds, so the
// model is refused at compile time (naming the node), as the reference refuses it when it runs,
// instead of compiling into a silent wrong answer. Also GatherElements and GatherND.
TEST(CompileErrors, ConstantGatherIndicesOutOfRange) {
  struct Case {
    const char* op;
    Shape data, indices;
  };
  for (const Case& k : {Case{"Gather", {5, 3}, {2}}, Case{"GatherElements", {5, 3}, {2, 3}}, Case{"GatherND", {5, 3}, {2, 1}}}) {
    testing::TempDir dir;
    ModelBuilder b("gather", 13);
    b.input("x", DType::Float32, k.data);
    std::vector<int64_t> idx(static_cast<size_t>(num_elements(k.indices)), 1);
    idx.back() = 7;  // axis 0 has 5 entries
    b.initializer("idx", Tensor::from_ints(DType::Int64, k.indices, idx));
    b.node(k.op, {"x", "idx"}, {"y"}, "the_gather");
    b.output("y", DType::Float32, Shape{2, 3});  // the output of all three

    b.save(dir.path("g.onnx"));
    std::string msg = expect_compile_error(dir.path("g.onnx") + " -o " + dir.path("pkg"), dir, "the_gather");
    EXPECT_NE(msg.find("7 is out of range"), std::string::npos) << k.op << ": " << msg;
    EXPECT_EQ(entries(dir.path(""), {"g.onnx"}), std::vector<std::string>{}) << k.op;
  }
}

}  // namespace
}  // namespace kiln
