// drop_qdq_around_moves (frontend/passes/drop_qdq_moves.h): a move between a DequantizeLinear and a
// QuantizeLinear of the same parameters runs on the codes and gives the codes the float form gives;
// other parameters, or a float result read elsewhere, keep the float form. quantize_before_moves: a
// QuantizeLinear after a Concat, a pool and a Dropout runs before them and gives the same codes.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>

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

// a, b uint8 [1, 4, 5, 5], each dequantized with its own parameters -> Concat -> MaxPool 3x3
// (stride 2, padded) -> Dropout -> QuantizeLinear with scale `ys`, zero point `yz`; with `float_out`
// the concat's float result is a graph output too.
ModelBuilder fire_module(double ys, int64_t yz, bool float_out) {
  ModelBuilder b("fire", 13);
  b.input("a", DType::UInt8, Shape{1, 4, 5, 5});
  b.input("b", DType::UInt8, Shape{1, 4, 5, 5});
  b.initializer("sa", Tensor::scalar_double(DType::Float32, 0.05));
  b.initializer("za", Tensor::scalar_int(DType::UInt8, 100));
  b.initializer("sb", Tensor::scalar_double(DType::Float32, 0.013));
  b.initializer("zb", Tensor::scalar_int(DType::UInt8, 7));
  b.initializer("ys", Tensor::scalar_double(DType::Float32, ys));
  b.initializer("yz", Tensor::scalar_int(DType::UInt8, yz));
  b.node("DequantizeLinear", {"a", "sa", "za"}, {"af"});
  b.node("DequantizeLinear", {"b", "sb", "zb"}, {"bf"});
  b.node("Concat", {"af", "bf"}, {"cf"}).attr("axis", int64_t{1});
  b.node("MaxPool", {"cf"}, {"pf"})
      .attr("kernel_shape", std::vector<int64_t>{3, 3})
      .attr("strides", std::vector<int64_t>{2, 2})
      .attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  b.node("Dropout", {"pf"}, {"df"});
  b.node("QuantizeLinear", {"df", "ys", "yz"}, {"y"});
  b.output("y", DType::UInt8, Shape{1, 8, 3, 3});
  if (float_out) b.output("cf", DType::Float32, Shape{1, 8, 5, 5});
  return b;
}

std::map<std::string, Tensor> fire_inputs() {
  Tensor a(DType::UInt8, {1, 4, 5, 5}), b(DType::UInt8, {1, 4, 5, 5});
  for (int64_t i = 0; i < a.size(); ++i) {
    a.set_int(i, (i * 97) % 256);
    b.set_int(i, (i * 61 + 5) % 256);
  }
  return {{"a", a}, {"b", b}};
}

// fire_module(ys, yz, float_out) before and after quantize_before_moves, which makes `rewrites`
// rewrites, and remove_dead_nodes.
std::pair<Graph, Graph> quantized_earlier(double ys, int64_t yz, bool float_out, int rewrites) {
  ModelBuilder b = fire_module(ys, yz, float_out);
  Graph g = testing::prepared_graph(b);
  const Graph before = g;
  EXPECT_EQ(quantize_before_moves(g), rewrites);
  remove_dead_nodes(g);
  return {before, g};
}

TEST(QuantizeBeforeMoves, AConcatAPoolAndADropoutRunOnCodesRequantizedFirst) {
  const auto [before, g] = quantized_earlier(0.02, 120, false, 3);  // past the Dropout, the pool and the Concat
  EXPECT_EQ(testing::op_types(g), (std::vector<std::string>{"DequantizeLinear", "DequantizeLinear", "QuantizeLinear",
                                                            "QuantizeLinear", "Concat", "MaxPool", "Identity"}));
  for (const Node& n : g.nodes)
    if (n.op_type == "Concat" || n.op_type == "MaxPool") {
      EXPECT_EQ(g.value(n.outputs[0]).dtype, DType::UInt8) << n.name;
    }
  EXPECT_EQ(run_reference(before, fire_inputs())[0].to_ints(), run_reference(g, fire_inputs())[0].to_ints());
}

// When the output's parameters are a's, a's codes go to the Concat as they are.
TEST(QuantizeBeforeMoves, AnInputWithTheOutputsParametersIsConcatenatedAsItIs) {
  const auto [before, g] = quantized_earlier(0.05, 100, false, 4);
  EXPECT_EQ(testing::op_types(g), (std::vector<std::string>{"DequantizeLinear", "QuantizeLinear", "Concat", "MaxPool", "Identity"}));
  const auto concat = std::find_if(g.nodes.begin(), g.nodes.end(), [](const Node& n) { return n.op_type == "Concat"; });
  EXPECT_EQ(concat->inputs[0], "a");
  EXPECT_EQ(run_reference(before, fire_inputs())[0].to_ints(), run_reference(g, fire_inputs())[0].to_ints());
}

// A float result read elsewhere stays float: the QuantizeLinear passes the pool and the Dropout and
// stops at the Concat, whose output is a graph output.
TEST(QuantizeBeforeMoves, AFloatResultReadElsewhereStopsIt) {
  const auto [before, g] = quantized_earlier(0.02, 120, true, 2);
  EXPECT_EQ(testing::op_types(g), (std::vector<std::string>{"DequantizeLinear", "DequantizeLinear", "Concat", "QuantizeLinear",
                                                            "MaxPool", "Identity"}));
  const std::vector<Tensor> want = run_reference(before, fire_inputs()), got = run_reference(g, fire_inputs());
  EXPECT_EQ(want[0].to_ints(), got[0].to_ints());
  EXPECT_EQ(want[1].to_doubles(), got[1].to_doubles());
}

}  // namespace
}  // namespace kiln
