#include "frontend/passes/bind_input_shapes.h"

#include <gtest/gtest.h>

#include "frontend/ir/error.h"
#include "frontend/onnx/onnx_import.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

Graph symbolic_model() {
  ModelBuilder b("g", 13);
  b.input("x", DType::Float32, std::vector<Dim>{{-1, "batch"}, {3, ""}, {-1, ""}});
  b.node("Relu", {"x"}, {"y"});
  b.output("y", DType::Float32, Shape{});
  return import_onnx_bytes(b.serialize(), "sym.onnx");
}

std::string error_of(Graph g, const ShapeBindings& b) {
  try {
    bind_input_shapes(g, b);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(BindInputShapes, WholeShapeBinding) {
  Graph g = symbolic_model();
  ShapeBindings b;
  b.input_shapes["x"] = {2, 3, 5};
  bind_input_shapes(g, b);
  EXPECT_EQ(g.value("x").shape, (Shape{2, 3, 5}));
}

TEST(BindInputShapes, UnboundDimensionNamesInputAndAxis) {
  ShapeBindings b;
  b.dims["batch"] = 4;
  std::string err = error_of(symbolic_model(), b);
  EXPECT_NE(err.find("sym.onnx"), std::string::npos) << err;
  EXPECT_NE(err.find("'x'"), std::string::npos) << err;
  EXPECT_NE(err.find("axis 2"), std::string::npos) << err;
  err = error_of(symbolic_model(), {});
  EXPECT_NE(err.find("'batch'"), std::string::npos) << err;
}

TEST(BindInputShapes, ConflictsAreErrors) {
  ShapeBindings wrong_extent;
  wrong_extent.input_shapes["x"] = {2, 4, 5};  // model declares 3 at axis 1
  EXPECT_NE(error_of(symbolic_model(), wrong_extent).find("axis 1"), std::string::npos);
  ShapeBindings wrong_rank;
  wrong_rank.input_shapes["x"] = {2, 3};
  EXPECT_NE(error_of(symbolic_model(), wrong_rank).find("rank"), std::string::npos);
  ShapeBindings unknown;
  unknown.input_shapes["nope"] = {1};
  EXPECT_NE(error_of(symbolic_model(), unknown).find("'nope'"), std::string::npos);
}

TEST(BindInputShapes, FrozenInputBecomesAConstant) {
  Graph g = symbolic_model();
  ShapeBindings b;
  b.frozen["x"] = Tensor(DType::Float32, {1, 3, 2});
  bind_input_shapes(g, b);
  EXPECT_TRUE(g.inputs.empty());
  ASSERT_NE(g.value("x").constant, nullptr);
  EXPECT_EQ(g.value("x").shape, (Shape{1, 3, 2}));
}

TEST(BindInputShapes, ParsesCommandLineSpecs) {
  EXPECT_EQ(parse_input_shape("data=1x3x224x224").second, (Shape{1, 3, 224, 224}));
  EXPECT_EQ(parse_input_shape("a=b=2x2").first, "a=b");  // the last '=' splits: names may hold '='
  EXPECT_EQ(parse_input_shape("s=").second, Shape{});
  EXPECT_EQ(parse_dim("batch=8").second, 8);
  EXPECT_THROW(parse_input_shape("x=1xfoo"), Error);
  EXPECT_THROW(parse_dim("batch"), Error);
  EXPECT_THROW(parse_dim("batch=-1"), Error);
}

// --freeze sr=16000: the value takes the input's declared dtype, and its declared shape when known.
TEST(BindInputShapes, CommandLineFrozenValuesTakeTheDeclaredTypeAndShape) {
  ModelBuilder b("g", 13);
  b.input("sr", DType::Int64, Shape{});
  b.input("v", DType::Float32, std::vector<Dim>{{-1, "n"}});
  b.node("Cast", {"sr"}, {"f"}).attr("to", int64_t{1});
  b.node("Add", {"v", "f"}, {"y"});
  b.output("y", DType::Float32, Shape{});
  Graph g = import_onnx_bytes(b.serialize(), "freeze.onnx");
  ShapeBindings bindings;
  bindings.frozen_values.insert(parse_frozen_value("sr=16000"));
  bindings.frozen_values.insert(parse_frozen_value("v=1.5,2"));
  bind_input_shapes(g, bindings);
  EXPECT_TRUE(g.inputs.empty());
  EXPECT_EQ(g.value("sr").constant->dtype(), DType::Int64);
  EXPECT_EQ(g.value("sr").shape, Shape{});
  EXPECT_EQ(g.value("sr").constant->get_int(0), 16000);
  EXPECT_EQ(g.value("v").shape, Shape{2});
  EXPECT_EQ(g.value("v").constant->to_doubles(), (std::vector<double>{1.5, 2}));
}

TEST(BindInputShapes, BadFrozenValuesAreNamed) {
  EXPECT_THROW(parse_frozen_value("sr"), Error);
  EXPECT_THROW(parse_frozen_value("sr="), Error);
  EXPECT_THROW(parse_frozen_value("sr=16k"), Error);
  EXPECT_THROW(parse_frozen_value("sr=1,,2"), Error);
  ShapeBindings b;
  b.frozen_values["nope"] = {1};
  EXPECT_NE(error_of(symbolic_model(), b).find("cannot freeze 'nope', which is not a tensor graph input"), std::string::npos);
  b.frozen_values = {{"x", {1, 2}}};
  EXPECT_NE(error_of(symbolic_model(), b).find("--freeze x gives 2 values; the input is declared"), std::string::npos)
      << error_of(symbolic_model(), b);
}

}  // namespace
}  // namespace kiln
