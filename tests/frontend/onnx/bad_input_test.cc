// Bad input end to end: each malformed model given to `kiln inspect` must produce exactly one line on
// stderr that names the file (and the node, where there is one), and exit code 2. Never a crash or a hang.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

using testing::CliResult;
using testing::run_kiln;

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Checks the contract and returns the message for further checks.
std::string expect_one_line_error(const std::string& model_path, const testing::TempDir& dir) {
  CliResult r = run_kiln("inspect " + model_path, dir);
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_EQ(std::count(r.stderr_text.begin(), r.stderr_text.end(), '\n'), 1) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find(model_path), std::string::npos) << "message does not name the file: " << r.stderr_text;
  return r.stderr_text;
}

TEST(BadInput, MissingFile) {
  testing::TempDir dir;
  std::string msg = expect_one_line_error(dir.path("no_such_model.onnx"), dir);
  EXPECT_NE(msg.find("cannot open"), std::string::npos) << msg;
}

TEST(BadInput, TruncatedProtobuf) {
  testing::TempDir dir;
  ModelBuilder b = testing::relu_model();
  b.initializer("w", Tensor(DType::Float32, {64}));
  std::string bytes = b.serialize();
  write_bytes(dir.path("truncated.onnx"), bytes.substr(0, bytes.size() - 40));
  expect_one_line_error(dir.path("truncated.onnx"), dir);
}

TEST(BadInput, CorruptProtobuf) {
  testing::TempDir dir;
  std::string junk;
  for (int i = 0; i < 256; ++i) junk.push_back(static_cast<char>((i * 97 + 13) & 0xff));
  write_bytes(dir.path("corrupt.onnx"), junk);
  std::string msg = expect_one_line_error(dir.path("corrupt.onnx"), dir);
  EXPECT_NE(msg.find("not a valid ONNX model"), std::string::npos) << msg;
}

TEST(BadInput, GraphWithACycle) {
  testing::TempDir dir;
  ModelBuilder b("cycle", 13);
  b.input("x", DType::Float32, Shape{2});
  b.node("Add", {"x", "b"}, {"a"}, "node_a");
  b.node("Relu", {"a"}, {"b"}, "node_b");
  b.output("b", DType::Float32, Shape{2});
  b.save(dir.path("cycle.onnx"));
  std::string msg = expect_one_line_error(dir.path("cycle.onnx"), dir);
  EXPECT_NE(msg.find("cycle"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node_"), std::string::npos) << msg;
}

TEST(BadInput, UnknownOp) {
  testing::TempDir dir;
  ModelBuilder b = testing::relu_model();
  b.proto().mutable_graph()->mutable_node(0)->set_op_type("FrobnicateTensor");
  b.save(dir.path("unknown_op.onnx"));
  std::string msg = expect_one_line_error(dir.path("unknown_op.onnx"), dir);
  EXPECT_NE(msg.find("the_relu"), std::string::npos) << msg;
  EXPECT_NE(msg.find("FrobnicateTensor"), std::string::npos) << msg;
}

TEST(BadInput, UnsupportedOpset) {
  testing::TempDir dir;
  ModelBuilder b = testing::relu_model();
  b.proto().mutable_opset_import(0)->set_version(3);
  b.save(dir.path("opset3.onnx"));
  std::string msg = expect_one_line_error(dir.path("opset3.onnx"), dir);
  EXPECT_NE(msg.find("opset 3"), std::string::npos) << msg;
}

TEST(BadInput, InitializerSizeDoesNotMatchShape) {
  testing::TempDir dir;
  ModelBuilder b = testing::relu_model();
  auto* t = b.proto().mutable_graph()->add_initializer();
  t->set_name("short_weight");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->add_dims(4);
  t->set_raw_data(std::string(12, '\0'));  // 3 floats for 16
  b.save(dir.path("short_init.onnx"));
  std::string msg = expect_one_line_error(dir.path("short_init.onnx"), dir);
  EXPECT_NE(msg.find("short_weight"), std::string::npos) << msg;
}

// A narrow type's values in int32_data are counted before anything is allocated: a huge shape with
// no data is one line, not gigabytes (the fuzzer found 2^33 uint2 elements taking 2 GiB first).
TEST(BadInput, NarrowInitializerWithAHugeShapeAndNoData) {
  testing::TempDir dir;
  ModelBuilder b = testing::relu_model();
  auto* t = b.proto().mutable_graph()->add_initializer();
  t->set_name("huge_uint2");
  t->set_data_type(25);  // UINT2
  t->add_dims(int64_t{1} << 34);
  t->add_int32_data(0);
  b.save(dir.path("huge_uint2.onnx"));
  std::string msg = expect_one_line_error(dir.path("huge_uint2.onnx"), dir);
  EXPECT_NE(msg.find("huge_uint2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("int32_data has 1 entries"), std::string::npos) << msg;
}

TEST(BadInput, NodeInputThatNothingProduces) {
  testing::TempDir dir;
  ModelBuilder b("dangling", 13);
  b.input("x", DType::Float32, Shape{2});
  b.node("Add", {"x", "ghost"}, {"y"}, "haunted_add");
  b.output("y", DType::Float32, Shape{2});
  b.save(dir.path("dangling.onnx"));
  std::string msg = expect_one_line_error(dir.path("dangling.onnx"), dir);
  EXPECT_NE(msg.find("haunted_add"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'ghost'"), std::string::npos) << msg;
}

TEST(BadInput, WrongAttributeType) {
  testing::TempDir dir;
  // Opset 18: beyond libonnx's checker, so kiln's own attribute check must catch it.
  ModelBuilder b("attr", 18);
  b.input("x", DType::Float32, Shape{2, 3});
  b.node("Transpose", {"x"}, {"y"}, "bad_transpose").attr("perm", 1.5);  // perm must be ints
  b.output("y", DType::Float32, Shape{3, 2});
  b.save(dir.path("bad_attr.onnx"));
  std::string msg = expect_one_line_error(dir.path("bad_attr.onnx"), dir);
  EXPECT_NE(msg.find("bad_transpose"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'perm'"), std::string::npos) << msg;
}

TEST(BadInput, WrongAttributeTypeCaughtByOnnxChecker) {
  testing::TempDir dir;
  ModelBuilder b("attr", 13);  // opset <= 17: libonnx's checker applies and reports it
  b.input("x", DType::Float32, Shape{2, 3});
  b.node("Transpose", {"x"}, {"y"}, "bad_transpose").attr("perm", 1.5);
  b.output("y", DType::Float32, Shape{3, 2});
  b.save(dir.path("bad_attr13.onnx"));
  std::string msg = expect_one_line_error(dir.path("bad_attr13.onnx"), dir);
  EXPECT_NE(msg.find("bad_transpose"), std::string::npos) << msg;
  EXPECT_NE(msg.find("perm"), std::string::npos) << msg;
}

TEST(BadInput, UnboundSymbolicDimension) {
  testing::TempDir dir;
  ModelBuilder b("sym", 13);
  b.input("tokens", DType::Float32, std::vector<Dim>{{-1, "seq"}});
  b.node("Relu", {"tokens"}, {"y"});
  b.output("y", DType::Float32, Shape{});
  b.save(dir.path("sym.onnx"));
  CliResult r = run_kiln("dump " + dir.path("sym.onnx") + " --dump-after prune", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("'tokens'"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("--dim seq=N"), std::string::npos) << r.stderr_text;
}

}  // namespace
}  // namespace kiln
