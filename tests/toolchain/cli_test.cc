// The driver's surface: usage errors exit 2; the shipped demo model is exactly what `kiln zoo` writes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

int run(const std::string& args) {
  int status = std::system((std::string(KILN_BINARY) + " " + args + " >/dev/null 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(Cli, UsageErrorsExitTwo) {
  EXPECT_EQ(run(""), 2);
  EXPECT_EQ(run("no-such-command"), 2);
  EXPECT_EQ(run("inspect"), 2);
  EXPECT_EQ(run("zoo no_such_model -o /dev/null"), 2);
  EXPECT_EQ(run("--help"), 0);
}

TEST(Cli, ShippedDemoModelIsWhatTheZooWrites) {
  testing::TempDir dir;
  ASSERT_EQ(run("zoo tiny_cnn -o " + dir.path("m.onnx")), 0);
  std::string written = slurp(dir.path("m.onnx"));
  ASSERT_FALSE(written.empty());
  EXPECT_EQ(written, slurp(std::string(KILN_SOURCE_DIR) + "/examples/tiny_cnn.onnx"));
  ASSERT_EQ(run("zoo tiny_cnn --seed 2 -o " + dir.path("m2.onnx")), 0);
  EXPECT_NE(written, slurp(dir.path("m2.onnx")));  // the seed matters
}

}  // namespace
}  // namespace kiln
