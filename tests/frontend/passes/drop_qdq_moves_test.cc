// drop_qdq_around_moves (frontend/passes/drop_qdq_moves.h): a move between a DequantizeLinear and a
// QuantizeLinear of the same parameters runs on the codes and gives the codes the float form gives;
// other parameters, or a float result read elsewhere, keep the float form.
#include <gtest/gtest.h>

#include "frontend/passes/drop_qdq_moves.h"
#include "frontend/passes/remove_dead_nodes.h"
#include "frontend/reference/interpreter.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

// x uint8 [1, 2, 5, 5] -> DequantizeLinear -> MaxPool 3x3 (stride 2, padded) -> QuantizeLinear ->
// DequantizeLinear -> Flatten -> QuantizeLinear (zero point `y_zero`) -> y; with `float_out` the
// pool's float result is a graph output too.
ModelBuilder pooled(int64_t y_zero, bool float_out) {
  ModelBuilder b("pooled", 13);
  b.input("x", DType::UInt8, Shape{1, 2, 5, 5});
  b.initializer("s", Tensor::scalar_double(DType::Float32, 0.05));
  b.initializer("z", Tensor::scalar_int(DType::UInt8, 100));
  b.initializer("zy", Tensor::scalar_int(DType::UInt8, y_zero));
  b.node("DequantizeLinear", {"x", "s", "z"}, {"xf"});
  b.node("MaxPool", {"xf"}, {"pf"})
      .attr("kernel_shape", std::vector<int64_t>{3, 3})
      .attr("strides", std::vector<int64_t>{2, 2})
      .attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  b.node("QuantizeLinear", {"pf", "s", "z"}, {"p"});
  b.node("DequantizeLinear", {"p", "s", "z"}, {"pd"});
  b.node("Flatten", {"pd"}, {"ff"});
  b.node("QuantizeLinear", {"ff", "s", "zy"}, {"y"});
  b.output("y", DType::UInt8, Shape{1, 18});
  if (float_out) b.output("pf", DType::Float32, Shape{1, 2, 3, 3});
  return b;
}

void expect_same_codes(const Graph& a, const Graph& b) {
  Tensor x(DType::UInt8, {1, 2, 5, 5});
  for (int64_t i = 0; i < x.size(); ++i) x.set_int(i, (i * 97) % 256);  // codes on both sides of 100
  EXPECT_EQ(run_reference(a, {{"x", x}})[0].to_ints(), run_reference(b, {{"x", x}})[0].to_ints());
}

TEST(DropQdqMoves, APaddedPoolAndAFlattenBetweenEqualParametersRunOnTheCodes) {
  ModelBuilder b = pooled(100, false);
  Graph g = testing::prepared_graph(b);
  const Graph before = g;
  EXPECT_EQ(drop_qdq_around_moves(g), 2);
  remove_dead_nodes(g);
  EXPECT_EQ(testing::op_types(g), (std::vector<std::string>{"MaxPool", "Flatten"}));
  EXPECT_EQ(g.value(g.nodes[0].outputs[0]).dtype, DType::UInt8);
  expect_same_codes(before, g);
}

TEST(DropQdqMoves, OtherParametersOrAFloatResultReadElsewhereKeepTheFloatForm) {
  ModelBuilder other = pooled(90, false);
  Graph g = testing::prepared_graph(other);
  const Graph before = g;
  EXPECT_EQ(drop_qdq_around_moves(g), 1);  // the pool's pair; the Flatten requantizes to zero point 90
  expect_same_codes(before, g);
  ModelBuilder read = pooled(100, true);
  Graph h = testing::prepared_graph(read);
  EXPECT_EQ(drop_qdq_around_moves(h), 1);  // the Flatten's pair; the pool's float result is an output
}

}  // namespace
}  // namespace kiln
