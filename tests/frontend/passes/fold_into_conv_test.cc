#include "frontend/passes/fold_into_conv.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

using testing::op_types;
using testing::prepared_graph;
using testing::random_weights;

// Folds `g` and checks that the folded graph computes what the original did, to float32 rounding.
int fold_and_compare(Graph& g) { return testing::rewrite_and_compare(g, fold_into_conv); }

Tensor positive(const Shape& shape, uint32_t seed) {
  Tensor t = random_weights(shape, seed);
  for (int64_t i = 0; i < t.size(); ++i) t.set_double(i, 0.5 + std::abs(t.get_double(i)));
  return t;
}

void add_batchnorm(ModelBuilder& b, const std::string& in, const std::string& out, int64_t channels, uint32_t seed) {
  b.initializer(out + ".scale", random_weights({channels}, seed));
  b.initializer(out + ".bias", random_weights({channels}, seed + 1));
  b.initializer(out + ".mean", random_weights({channels}, seed + 2));
  b.initializer(out + ".var", positive({channels}, seed + 3));
  b.node("BatchNormalization", {in, out + ".scale", out + ".bias", out + ".mean", out + ".var"}, {out})
      .attr("epsilon", 1e-3);
}

// Conv (no bias) -> BatchNormalization -> Relu: the ResNet block; the BN disappears into a Conv with a bias.
TEST(FoldIntoConv, BatchNormAfterAConvWithoutBiasBecomesItsBias) {
  ModelBuilder b("conv_bn", 13);
  b.input("x", DType::Float32, Shape{1, 3, 6, 6});
  b.initializer("w", random_weights({4, 3, 3, 3}, 1));
  b.node("Conv", {"x", "w"}, {"c"}).attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  add_batchnorm(b, "c", "bn", 4, 10);
  b.node("Relu", {"bn"}, {"y"});
  b.output("y", DType::Float32, Shape{});
  Graph g = prepared_graph(b);
  EXPECT_EQ(fold_and_compare(g), 1);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"Conv", "Relu"}));
  ASSERT_EQ(g.nodes[0].inputs.size(), 3u);
  EXPECT_NE(g.value(g.nodes[0].inputs[2]).constant, nullptr);
  EXPECT_FALSE(g.has_value("w"));  // the unfolded weight is gone
}

// A grouped Conv with a bias, then BN, then Mul and Add by per-channel constants: three folds in a row.
TEST(FoldIntoConv, ChainsOfBatchNormMulAndAddFoldOneAfterAnother) {
  ModelBuilder b("chain", 13);
  b.input("x", DType::Float32, Shape{2, 4, 5, 5});
  b.initializer("w", random_weights({6, 2, 3, 3}, 1));
  b.initializer("b", random_weights({6}, 2));
  b.initializer("m", random_weights({6, 1, 1}, 3));
  b.initializer("a", random_weights({1, 6, 1, 1}, 4));
  b.node("Conv", {"x", "w", "b"}, {"c"}).attr("group", int64_t{2});
  add_batchnorm(b, "c", "bn", 6, 20);
  b.node("Mul", {"m", "bn"}, {"scaled"});
  b.node("Add", {"scaled", "a"}, {"y"});
  b.output("y", DType::Float32, Shape{});
  Graph g = prepared_graph(b);
  EXPECT_EQ(fold_and_compare(g), 3);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"Conv"}));
  EXPECT_EQ(g.nodes[0].outputs[0], "y");
}

// ConvTranspose's weight is C x M/group x K: the scale of output channel m lands on dimension 1.
TEST(FoldIntoConv, BatchNormAfterAGroupedConvTranspose) {
  ModelBuilder b("deconv_bn", 13);
  b.input("x", DType::Float32, Shape{1, 4, 3, 3});
  b.initializer("w", random_weights({4, 3, 2, 2}, 1));
  b.node("ConvTranspose", {"x", "w"}, {"c"}).attr("group", int64_t{2}).attr("strides", std::vector<int64_t>{2, 2});
  add_batchnorm(b, "c", "y", 6, 30);
  b.output("y", DType::Float32, Shape{});
  Graph g = prepared_graph(b);
  EXPECT_EQ(fold_and_compare(g), 1);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"ConvTranspose"}));
}

// What must not fold: a conv output read twice, a graph output, a non-constant or non-per-channel
// operand, a training-mode BN. The graph is left as it was.
TEST(FoldIntoConv, LeavesOpsThatAreNotPerChannelAffineMapsOfAConvAlone) {
  ModelBuilder b("no_fold", 15);
  b.input("x", DType::Float32, Shape{1, 2, 4, 4});
  b.input("s", DType::Float32, Shape{1, 2, 1, 1});
  b.initializer("w", random_weights({2, 2, 1, 1}, 1));
  b.initializer("spatial", random_weights({1, 1, 4, 1}, 2));
  b.node("Conv", {"x", "w"}, {"c1"});
  b.node("Mul", {"c1", "s"}, {"y1"});  // not a constant
  b.node("Conv", {"x", "w"}, {"c2"});
  b.node("Mul", {"c2", "spatial"}, {"y2"});  // varies along a spatial axis
  b.node("Conv", {"x", "w"}, {"c3"});
  b.node("Relu", {"c3"}, {"y3"});
  add_batchnorm(b, "c3", "y4", 2, 40);  // c3 has two readers
  b.node("Conv", {"x", "w"}, {"c5"});
  add_batchnorm(b, "c5", "y5", 2, 50);  // c5 is a graph output too
  b.output("y1", DType::Float32, Shape{});
  b.output("y2", DType::Float32, Shape{});
  b.output("y3", DType::Float32, Shape{});
  b.output("y4", DType::Float32, Shape{});
  b.output("y5", DType::Float32, Shape{});
  b.output("c5", DType::Float32, Shape{});
  Graph g = prepared_graph(b);
  const std::vector<std::string> ops = op_types(g);
  EXPECT_EQ(fold_into_conv(g), 0);
  EXPECT_EQ(op_types(g), ops);
}

// A norm whose input is no conv's own (RepVGG's identity branch reads the block's input, which a
// conv reads too; a norm after a Gemm): fold leaves it, and it becomes Mul and Add by per-channel
// constants that compute the same values, on 4-D maps and on [N, C] rows alike.
TEST(BatchNormsToAffine, NormsFoldLeavesBecomeAPerChannelMulAndAdd) {
  ModelBuilder b("identity_bn", 15);
  b.input("x", DType::Float32, Shape{2, 4, 5, 5});
  b.input("r", DType::Float32, Shape{3, 4});
  b.initializer("w", random_weights({4, 4, 3, 3}, 1));
  b.node("Conv", {"x", "w"}, {"c"}).attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  add_batchnorm(b, "x", "id", 4, 10);
  b.node("Add", {"c", "id"}, {"y"});
  add_batchnorm(b, "r", "rows", 4, 20);
  b.output("y", DType::Float32, Shape{});
  b.output("rows", DType::Float32, Shape{});
  Graph g = prepared_graph(b);
  EXPECT_EQ(testing::rewrite_and_compare(g, batch_norms_to_affine), 2);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"Conv", "Mul", "Add", "Add", "Mul", "Add"}));
  EXPECT_EQ(g.value(g.nodes[1].inputs[1]).shape, (Shape{4, 1, 1}));
  EXPECT_EQ(g.value(g.nodes[4].inputs[1]).shape, (Shape{4}));
}

// In training mode a norm uses the batch's statistics: not a constant affine map, left alone.
TEST(BatchNormsToAffine, TrainingModeNormsStay) {
  ModelBuilder b("training_bn", 15);
  b.input("x", DType::Float32, Shape{2, 4, 5, 5});
  for (const char* p : {"scale", "bias", "mean"}) b.initializer(std::string("bn.") + p, random_weights({4}, 3));
  b.initializer("bn.var", positive({4}, 4));
  b.node("BatchNormalization", {"x", "bn.scale", "bn.bias", "bn.mean", "bn.var"}, {"bn"}).attr("training_mode", int64_t{1});
  b.output("bn", DType::Float32, Shape{});
  Graph g = prepared_graph(b);
  EXPECT_EQ(batch_norms_to_affine(g), 0);
  EXPECT_EQ(op_types(g), (std::vector<std::string>{"BatchNormalization"}));
}

}  // namespace
}  // namespace kiln
