// QDQ fusion (frontend/passes/fuse_qdq.h): the patterns ONNX Runtime fuses become QLinearConv and
// QLinearMatMul, their weights stay int8 through shape inference, and the fused graph computes the
// QOperator form's integers exactly; patterns whose integer form would not be the same computation
// (a bias scale that is not x_scale * w_scale, a float result read twice) keep their float form.
#include <gtest/gtest.h>

#include <algorithm>

#include "frontend/passes/fuse_qdq.h"
#include "frontend/passes/remove_dead_nodes.h"
#include "frontend/reference/interpreter.h"
#include "frontend/zoo/zoo.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

int count(const std::vector<std::string>& ops, const std::string& op) {
  return static_cast<int>(std::count(ops.begin(), ops.end(), op));
}

TEST(FuseQdq, TheQdqKeywordSpotterBecomesItsQOperatorTwin) {
  ModelBuilder qdq = build_zoo_model("ds_cnn_qdq", {}), qop = build_zoo_model("ds_cnn_int8", {});
  Graph g = testing::prepared_graph(qdq);
  // Shape inference kept every weight and bias int8/int32 (their DequantizeLinear unfolded).
  EXPECT_EQ(count(testing::op_types(g), "DequantizeLinear"), 2 + 9 * 3 + 2);
  const Graph unfused = g;
  EXPECT_EQ(fuse_qdq(g), 10);
  remove_dead_nodes(g);
  const std::vector<std::string> ops = testing::op_types(g);
  EXPECT_EQ(count(ops, "QLinearConv"), 9);
  EXPECT_EQ(count(ops, "QLinearMatMul"), 1);
  EXPECT_EQ(count(ops, "Conv") + count(ops, "MatMul"), 0);
  EXPECT_EQ(count(ops, "DequantizeLinear"), 2);  // before the pool and the logits
  const Graph twin = testing::prepared_graph(qop);
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    const Tensor x = testing::random_weights({1, 1, 49, 10}, seed);
    const Tensor a = run_reference(g, {{"mfcc", x}})[0], b = run_reference(twin, {{"mfcc", x}})[0],
                 c = run_reference(unfused, {{"mfcc", x}})[0];
    for (int64_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a.get_double(i), b.get_double(i)) << "seed " << seed << " word " << i;
      EXPECT_NEAR(a.get_double(i), c.get_double(i), 0.0625 + 1e-9) << "at most one step from the float form";
    }
  }
}

// x [1, 4, 6, 6] int8 -> DequantizeLinear -> Conv (8 3x3 filters, int8, per-channel scales, int32 bias)
// -> QuantizeLinear -> y; `bias_scale_factor` scales the bias's scale away from x_scale * w_scale, and
// `read_twice` makes the Conv's float output a graph output too.
ModelBuilder qdq_conv(float bias_scale_factor, bool read_twice) {
  ModelBuilder b("qdq_conv", 13);
  b.input("x", DType::Int8, Shape{1, 4, 6, 6});
  std::vector<int64_t> w(8 * 4 * 9);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int64_t>((i * 37) % 255) - 127;
  std::vector<double> ws(8), bs(8), bias(8);
  const float xs = 0.05f;
  for (size_t c = 0; c < 8; ++c) {
    ws[c] = 0.01 + 0.001 * static_cast<double>(c);
    bs[c] = static_cast<double>(xs * static_cast<float>(ws[c]) * bias_scale_factor);
    bias[c] = static_cast<double>(c) * 10 - 40;
  }
  b.initializer("xs", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{xs}));
  b.initializer("xz", Tensor::from_ints(DType::Int8, {}, std::vector<int64_t>{3}));
  b.initializer("w", Tensor::from_ints(DType::Int8, {8, 4, 3, 3}, w));
  b.initializer("ws", Tensor::from_doubles(DType::Float32, {8}, ws));
  b.initializer("b", Tensor::from_doubles(DType::Int32, {8}, bias));
  b.initializer("bs", Tensor::from_doubles(DType::Float32, {8}, bs));
  b.initializer("ys", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{0.1}));
  b.initializer("yz", Tensor::from_ints(DType::Int8, {}, std::vector<int64_t>{-5}));
  b.node("DequantizeLinear", {"x", "xs", "xz"}, {"xf"});
  b.node("DequantizeLinear", {"w", "ws"}, {"wf"}).attr("axis", int64_t{0});
  b.node("DequantizeLinear", {"b", "bs"}, {"bf"}).attr("axis", int64_t{0});
  b.node("Conv", {"xf", "wf", "bf"}, {"yf"}).attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  b.node("QuantizeLinear", {"yf", "ys", "yz"}, {"y"});
  b.output("y", DType::Int8, Shape{1, 8, 6, 6});
  if (read_twice) b.output("yf", DType::Float32, Shape{1, 8, 6, 6});
  return b;
}

TEST(FuseQdq, AConvWhoseIntegerFormIsExactIsFusedAndMatchesTheReference) {
  ModelBuilder b = qdq_conv(1.0f, false);
  Graph g = testing::prepared_graph(b);
  const Graph unfused = g;
  ASSERT_EQ(fuse_qdq(g), 1);
  remove_dead_nodes(g);
  EXPECT_EQ(testing::op_types(g), (std::vector<std::string>{"QLinearConv"}));
  // Integers the float form reaches too, but for a .5 the two round apart: at most one step.
  Tensor x(DType::Int8, {1, 4, 6, 6});
  for (int64_t i = 0; i < x.size(); ++i) x.set_int(i, (i * 53) % 256 - 128);
  const Tensor a = run_reference(g, {{"x", x}})[0], c = run_reference(unfused, {{"x", x}})[0];
  int64_t differ = 0;
  for (int64_t i = 0; i < a.size(); ++i) {
    EXPECT_LE(std::abs(a.get_int(i) - c.get_int(i)), 1);
    differ += a.get_int(i) != c.get_int(i);
  }
  EXPECT_LT(differ, a.size() / 50);
}

TEST(FuseQdq, ABiasScaledOtherwiseOrAFloatResultReadTwiceKeepsTheFloatForm) {
  for (const bool read_twice : {false, true}) {
    ModelBuilder b = qdq_conv(read_twice ? 1.0f : 2.0f, read_twice);
    Graph g = testing::prepared_graph(b);
    EXPECT_EQ(fuse_qdq(g), 0) << (read_twice ? "read twice" : "bias scale");
    const std::vector<std::string> ops = testing::op_types(g);
    EXPECT_EQ(count(ops, "Conv"), 1);
    // Not fused, so folded: the weight and bias are float constants, no DequantizeLinear of them is left.
    EXPECT_EQ(count(ops, "DequantizeLinear"), 1);
  }
}

}  // namespace
}  // namespace kiln
