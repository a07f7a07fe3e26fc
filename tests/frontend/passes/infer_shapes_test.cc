#include "frontend/passes/infer_shapes.h"

#include <gtest/gtest.h>

#include "frontend/ir/error.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/passes/bind_input_shapes.h"
#include "frontend/passes/remove_dead_nodes.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

Graph prepared(ModelBuilder& b) {
  Graph g = import_onnx_bytes(b.serialize(), "t.onnx");
  bind_input_shapes(g, {});
  infer_shapes(g);
  return g;
}

// The Shape -> Gather -> Unsqueeze -> Concat -> Reshape plumbing of transformer exports folds away,
// leaving one Reshape with a constant target.
TEST(InferShapes, FoldsShapePlumbingIntoStaticShapes) {
  ModelBuilder b("plumbing", 13);
  b.input("x", DType::Float32, Shape{2, 3, 4});
  b.initializer("zero", Tensor::scalar_int(DType::Int64, 0));
  b.initializer("axes0", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{0}));
  b.initializer("minus1", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{-1}));
  b.node("Shape", {"x"}, {"s"});
  b.node("Gather", {"s", "zero"}, {"batch"});
  b.node("Unsqueeze", {"batch", "axes0"}, {"batch1"});
  b.node("Concat", {"batch1", "minus1"}, {"target"}).attr("axis", int64_t{0});
  b.node("Reshape", {"x", "target"}, {"y"});
  b.output("y", DType::Float32, Shape{});
  Graph g = prepared(b);
  EXPECT_EQ(g.value("y").shape, (Shape{2, 12}));
  ASSERT_NE(g.value("target").constant, nullptr);
  EXPECT_EQ(g.value("target").constant->to_ints(), (std::vector<int64_t>{2, -1}));
  remove_dead_nodes(g);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "Reshape");
}

TEST(InferShapes, FoldsConstantArithmetic) {
  ModelBuilder b("arith", 13);
  b.input("x", DType::Float32, Shape{2});
  b.initializer("a", Tensor::from_doubles(DType::Float32, {2}, std::vector<double>{1, -5}));
  b.initializer("c", Tensor::from_doubles(DType::Float32, {2}, std::vector<double>{2, 3}));
  b.node("Add", {"a", "c"}, {"ac"});
  b.node("Relu", {"ac"}, {"r"});
  b.node("Add", {"x", "r"}, {"y"});
  b.output("y", DType::Float32, Shape{2});
  Graph g = prepared(b);
  ASSERT_NE(g.value("r").constant, nullptr);
  EXPECT_EQ(g.value("r").constant->to_doubles(), (std::vector<double>{3, 0}));
  EXPECT_EQ(g.value("y").constant, nullptr);  // depends on the input: stays a run-time node
}

TEST(InferShapes, ShapeFromAnInputNamesTheValue) {
  ModelBuilder b("dyn", 13);
  b.input("x", DType::Float32, Shape{2, 3});
  b.input("target", DType::Int64, Shape{2});
  b.node("Reshape", {"x", "target"}, {"y"}, "the_reshape");
  b.output("y", DType::Float32, Shape{});
  try {
    prepared(b);
    FAIL() << "expected NotConstant";
  } catch (const NotConstant& e) {
    EXPECT_EQ(e.value_name(), "target");
    std::string msg = e.what();
    EXPECT_NE(msg.find("t.onnx"), std::string::npos) << msg;
    EXPECT_NE(msg.find("the_reshape"), std::string::npos) << msg;
  }
}

TEST(InferShapes, IncompatibleBroadcastIsAnError) {
  ModelBuilder b("bcast", 13);
  b.input("x", DType::Float32, Shape{2, 3});
  b.input("z", DType::Float32, Shape{4});
  b.node("Add", {"x", "z"}, {"y"}, "bad_add");
  b.output("y", DType::Float32, Shape{});
  try {
    prepared(b);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad_add"), std::string::npos) << e.what();
  }
}

// Sizes are int64 arithmetic downstream (buffers, the workspace, the header's *_SIZE macros): a value
// whose bytes pass 2^48 is refused by name instead of compiling into a wrapped or zero size.
TEST(InferShapes, ValuesTooLargeToAddressAreErrorsNamingThem) {
  {
    ModelBuilder b("huge_input", 13);
    b.input("x", DType::Float32, Shape{int64_t{1} << 31, int64_t{1} << 31, 16});
    b.node("Relu", {"x"}, {"y"});
    b.output("y", DType::Float32, Shape{});
    try {
      prepared(b);
      FAIL() << "expected Error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("graph input 'x'"), std::string::npos) << e.what();
    }
  }
  {
    ModelBuilder b("huge_tile", 13);
    b.input("x", DType::Float32, Shape{2, 2});
    b.initializer("reps", Tensor::from_ints(DType::Int64, {2}, std::vector<int64_t>{int64_t{1} << 40, int64_t{1} << 40}));
    b.node("Tile", {"x", "reps"}, {"y"}, "big_tile");
    b.output("y", DType::Float32, Shape{});
    try {
      prepared(b);
      FAIL() << "expected Error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("big_tile"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace kiln
