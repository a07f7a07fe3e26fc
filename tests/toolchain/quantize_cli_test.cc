// `kiln quantize` (toolchain/quantize_command.h): a quantized model is written from seeded or given
// samples, and every bad input is one line on stderr naming what is wrong, with exit code 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "frontend/onnx/onnx_import.h"
#include "frontend/onnx/tensor_proto.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

// x [1, 2] -> MatMul by a constant [2, 3] -> y: the smallest model with something to quantize.
ModelBuilder dense_model() {
  ModelBuilder b("dense", 13);
  b.input("x", DType::Float32, Shape{1, 2});
  b.initializer("w", testing::random_weights({2, 3}, 1));
  b.node("MatMul", {"x", "w"}, {"y"});
  b.output("y", DType::Float32, Shape{1, 3});
  return b;
}

void expect_one_line_error(const testing::CliResult& r, const std::string& says) {
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find(says), std::string::npos) << r.stderr_text;
  EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
}

TEST(QuantizeCli, WritesAModelFromSeededSamplesOrTestDataDirectories) {
  testing::TempDir dir;
  dense_model().save(dir.path("m.onnx"));
  ASSERT_EQ(testing::run_kiln("quantize " + dir.path("m.onnx") + " -o " + dir.path("q.onnx"), dir).exit_code, 0);
  const Graph q = import_onnx_file(dir.path("q.onnx"));
  const std::vector<std::string> ops = testing::op_types(q);
  EXPECT_NE(std::find(ops.begin(), ops.end(), "QuantizeLinear"), ops.end());
  // The ONNX test-data layout: test_data_set_*/input_0.pb.
  std::filesystem::create_directories(dir.path("data/test_data_set_0"));
  save_tensor_file(dir.path("data/test_data_set_0/input_0.pb"), testing::random_weights({1, 2}, 5), "x");
  const testing::CliOutput out =
      testing::run_kiln_output("quantize " + dir.path("m.onnx") + " -o " + dir.path("q2.onnx") + " --data " + dir.path("data"), dir);
  EXPECT_EQ(out.exit_code, 0) << out.err;
  EXPECT_NE(out.out.find("(1 calibration samples)"), std::string::npos) << out.out;
}

TEST(QuantizeCli, BadInputIsOneLineAndExitCodeTwo) {
  testing::TempDir dir;
  dense_model().save(dir.path("m.onnx"));
  testing::relu_model().save(dir.path("relu.onnx"));
  std::ofstream(dir.path("junk.onnx")) << "junk";
  std::filesystem::create_directories(dir.path("empty"));
  const std::string out = " -o " + dir.path("q.onnx");
  expect_one_line_error(testing::run_kiln("quantize " + dir.path("relu.onnx") + out, dir), "relu.onnx: nothing to quantize");
  expect_one_line_error(testing::run_kiln("quantize " + dir.path("junk.onnx") + out, dir), "junk.onnx");
  expect_one_line_error(testing::run_kiln("quantize " + dir.path("none.onnx") + out, dir), "none.onnx");
  expect_one_line_error(testing::run_kiln("quantize " + dir.path("m.onnx") + out + " --data " + dir.path("empty"), dir),
                        "no " + dir.path("empty") + "/input_0.pb for input 'x'");
  expect_one_line_error(testing::run_kiln("quantize " + dir.path("m.onnx") + out + " --data " + dir.path("nodir"), dir),
                        "not a directory");
  expect_one_line_error(testing::run_kiln("quantize " + dir.path("m.onnx") + out + " --samples 0", dir),
                        "no calibration samples");
  expect_one_line_error(testing::run_kiln("quantize " + dir.path("m.onnx") + " -o " + dir.path("nodir/q.onnx"), dir),
                        "cannot write");
  EXPECT_FALSE(std::filesystem::exists(dir.path("q.onnx")));
}

}  // namespace
}  // namespace kiln
