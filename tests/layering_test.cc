// The dependency direction of DESIGN.md, checked on every #include of the source tree:
//   toolchain -> backends -> scheduler -> frontend, everything -> targets, runtime depends on nothing.
// Backends see only the frontend's IR (errors, dtypes), never its passes or partitioner: a backend that
// partitions or rewrites the graph again is the duplication the pipeline exists to prevent. A new module
// folder gets a row here or the tree walk fails, so a layer cannot be added without saying what it uses.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// For each module folder, the path prefixes its files may include (its own folder is always allowed).
const std::map<std::string, std::vector<std::string>>& allowed_includes() {
  static const std::map<std::string, std::vector<std::string>> rules = {
      {"runtime", {}},
      {"targets", {}},
      {"frontend", {"targets/"}},
      {"scheduler", {"frontend/", "targets/"}},
      {"backends", {"scheduler/", "frontend/ir/", "targets/", "runtime/"}},
      {"toolchain", {"backends/", "scheduler/", "frontend/", "targets/", "runtime/"}},
  };
  return rules;
}

const std::vector<std::string> kModules = {"toolchain", "backends", "scheduler", "frontend", "runtime", "targets"};

// Why `include` may not appear in a file of `module`, or "" when it may.
std::string layering_violation(const std::string& module, const std::string& include) {
  const auto slash = include.find('/');
  if (slash == std::string::npos) return "";
  const std::string top = include.substr(0, slash);
  if (top == module) return "";
  if (std::find(kModules.begin(), kModules.end(), top) == kModules.end()) return "";  // a system or third-party path
  auto rule = allowed_includes().find(module);
  if (rule == allowed_includes().end()) return "module '" + module + "' has no layering rule";
  for (const std::string& prefix : rule->second)
    if (include.starts_with(prefix)) return "";
  return module + "/ may not include " + include;
}

TEST(Layering, RuleAcceptsTheDesignedDirection) {
  EXPECT_EQ(layering_violation("toolchain", "backends/package/package.h"), "");
  EXPECT_EQ(layering_violation("backends", "scheduler/lower/loop_ir.h"), "");
  EXPECT_EQ(layering_violation("backends", "frontend/ir/error.h"), "");
  EXPECT_EQ(layering_violation("scheduler", "frontend/partition/partition.h"), "");
  EXPECT_EQ(layering_violation("frontend", "onnx/onnx_pb.h"), "");
  EXPECT_EQ(layering_violation("runtime", "runtime/rpc/net.h"), "");
}

TEST(Layering, RuleRejectsEveryUpwardOrSidewaysInclude) {
  EXPECT_NE(layering_violation("backends", "frontend/partition/partition.h"), "");
  EXPECT_NE(layering_violation("backends", "toolchain/pipeline.h"), "");
  EXPECT_NE(layering_violation("scheduler", "backends/llvm/codegen.h"), "");
  EXPECT_NE(layering_violation("frontend", "scheduler/te/compute.h"), "");
  EXPECT_NE(layering_violation("targets", "frontend/ir/error.h"), "");
  EXPECT_NE(layering_violation("runtime", "targets/target.h"), "");
  EXPECT_NE(layering_violation("runtime", "frontend/ir/graph.h"), "");
}

TEST(Layering, EveryIncludeInTheSourceTreeFollowsTheDirection) {
  const fs::path root = KILN_SOURCE_DIR;
  const std::regex include_line(R"(^\s*#\s*include\s*"([^"]+)\")");
  int files = 0;
  std::vector<std::string> violations;
  for (const std::string& module : kModules) {
    ASSERT_TRUE(fs::is_directory(root / module)) << (root / module);
    for (const auto& e : fs::recursive_directory_iterator(root / module)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".h" && ext != ".cc" && ext != ".c" && ext != ".cu")) continue;
      ++files;
      std::ifstream in(e.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        std::smatch m;
        if (!std::regex_search(line, m, include_line)) continue;
        const std::string why = layering_violation(module, m[1].str());
        if (!why.empty())
          violations.push_back(fs::relative(e.path(), root).string() + ":" + std::to_string(n) + ": " + why);
      }
    }
  }
  EXPECT_GT(files, 100) << "the walk found too few sources under " << root;
  std::string report;
  for (const std::string& v : violations) report += v + "\n";
  EXPECT_TRUE(violations.empty()) << report;
}

// Tests mirror the modules folder for folder: a test of scheduler/lower lives in tests/scheduler/lower,
// so a reader finds a module's tests without searching. Suites about the whole product (conformance,
// package, fuzz) and repository-wide checks like this one are the exceptions.
TEST(Layering, TestFoldersMirrorModuleFolders) {
  const fs::path root = KILN_SOURCE_DIR;
  const std::vector<std::string> whole_product = {"conformance", "package", "fuzz"};
  std::vector<std::string> orphans;
  int test_files = 0;
  for (const auto& e : fs::recursive_directory_iterator(root / "tests")) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || !name.ends_with("_test.cc")) continue;
    const fs::path folder = fs::relative(e.path().parent_path(), root / "tests");
    if (folder.empty() || folder == ".") continue;  // repository-wide checks
    const std::string top = *folder.begin();
    if (std::find(whole_product.begin(), whole_product.end(), top) != whole_product.end()) continue;
    ++test_files;
    if (!fs::is_directory(root / folder)) orphans.push_back((fs::path("tests") / folder / name).string());
  }
  EXPECT_GT(test_files, 50);
  std::string report;
  for (const std::string& o : orphans) report += o + " has no module folder to mirror\n";
  EXPECT_TRUE(orphans.empty()) << report;
}

}  // namespace
