// What `kiln quantize` quantizes (frontend/quantize/qdq_plan.h): Conv/Gemm/MatMul by constants with
// their inputs and outputs, ReLUs absorbed when nothing else reads the node's output, codes passed
// through MaxPool, and everything else left in float.
#include <gtest/gtest.h>

#include "frontend/onnx/onnx_import.h"
#include "frontend/quantize/qdq_plan.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

Graph imported(const ModelBuilder& b) { return import_onnx_bytes(b.serialize(), "test"); }

// x -> Conv c1 -> y1 -> Relu -> r1 -> MaxPool -> p1 -> Conv c2 -> y2 -> Concat(y2, p1) -> cat -> Conv c3 -> y3,
// y3 also read by a Sigmoid (the second output); `y1_out`: y1 is a graph output too.
ModelBuilder conv_chain(bool y1_out) {
  ModelBuilder b("chain", 13);
  b.input("x", DType::Float32, Shape{1, 3, 8, 8});
  b.initializer("w1", testing::random_weights({4, 3, 3, 3}, 1));
  b.initializer("b1", testing::random_weights({4}, 2));
  b.initializer("w2", testing::random_weights({4, 4, 1, 1}, 3));
  b.initializer("w3", testing::random_weights({2, 8, 1, 1}, 4));
  b.node("Conv", {"x", "w1", "b1"}, {"y1"}, "c1").attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  b.node("Relu", {"y1"}, {"r1"});
  b.node("MaxPool", {"r1"}, {"p1"}).attr("kernel_shape", std::vector<int64_t>{2, 2}).attr("strides", std::vector<int64_t>{2, 2});
  b.node("Conv", {"p1", "w2"}, {"y2"}, "c2");
  b.node("Concat", {"y2", "p1"}, {"cat"}).attr("axis", int64_t{1});
  b.node("Conv", {"cat", "w3"}, {"y3"}, "c3");
  b.node("Sigmoid", {"y3"}, {"s3"});
  b.output("y3", DType::Float32, Shape{1, 2, 4, 4});
  b.output("s3", DType::Float32, Shape{1, 2, 4, 4});
  if (y1_out) b.output("y1", DType::Float32, Shape{1, 4, 8, 8});
  return b;
}

TEST(QdqPlan, ConvsTakeTheirInputsOutputsAndReluAndMaxPoolPassesCodes) {
  const QdqPlan p = plan_qdq(imported(conv_chain(false)), true);
  ASSERT_EQ(p.nodes.size(), 3u);
  EXPECT_EQ(p.nodes[0].output, "y1");
  EXPECT_EQ(p.nodes[0].absorbed, "r1");
  EXPECT_EQ(p.nodes[0].channel_axis, 0);
  EXPECT_TRUE(p.nodes[0].per_channel);
  EXPECT_EQ(p.nodes[1].absorbed, "");
  EXPECT_EQ(p.activations, (std::vector<std::string>{"x", "r1", "p1", "y2", "cat", "y3"}));
  // The pool's codes are the ReLU's; the Concat (float between the pairs) has a range of its own.
  const std::map<std::string, std::string> from = {{"x", "x"},     {"r1", "r1"},   {"p1", "r1"},
                                                   {"y2", "y2"},   {"cat", "cat"}, {"y3", "y3"}};
  EXPECT_EQ(p.params_from, from);
}

TEST(QdqPlan, AReluIsNotAbsorbedWhenTheConvOutputIsReadElsewhere) {
  const QdqPlan p = plan_qdq(imported(conv_chain(true)), false);
  ASSERT_EQ(p.nodes.size(), 3u);
  EXPECT_EQ(p.nodes[0].absorbed, "");
  EXPECT_FALSE(p.nodes[0].per_channel);
  // The Relu's output is not quantized: the MaxPool reads it in float and its output has its own range.
  EXPECT_EQ(p.params_from.at("p1"), "p1");
  EXPECT_EQ(p.params_from.count("r1"), 0u);
}

TEST(QdqPlan, GemmAndMatMulAreQuantizedOnlyWithConstantWeightsTheIntegerFormTakes) {
  ModelBuilder b("dense", 13);
  b.input("a", DType::Float32, Shape{2, 4});
  b.input("m", DType::Float32, Shape{4, 3});
  b.initializer("w", testing::random_weights({4, 3}, 1));
  b.initializer("wt", testing::random_weights({3, 4}, 2));
  b.initializer("c", testing::random_weights({3}, 3));
  b.node("Gemm", {"a", "w", "c"}, {"g1"});                              // quantized: columns along axis 1
  b.node("Gemm", {"a", "wt", "c"}, {"g2"}).attr("transB", int64_t{1});  // quantized: rows of B^T, axis 0
  b.node("Gemm", {"a", "w", "c"}, {"g3"}).attr("alpha", 0.5);           // alpha: left in float
  b.node("MatMul", {"a", "m"}, {"g4"});                                 // B computed at run time: float
  b.node("MatMul", {"a", "w"}, {"g5"});                                 // quantized
  for (const char* o : {"g1", "g2", "g3", "g4", "g5"}) b.output(o, DType::Float32, Shape{2, 3});
  const QdqPlan p = plan_qdq(imported(b), true);
  ASSERT_EQ(p.nodes.size(), 3u);
  EXPECT_EQ(p.nodes[0].output, "g1");
  EXPECT_EQ(p.nodes[0].channel_axis, 1);
  EXPECT_EQ(p.nodes[1].output, "g2");
  EXPECT_EQ(p.nodes[1].channel_axis, 0);
  EXPECT_EQ(p.nodes[2].output, "g5");
  EXPECT_EQ(p.activations, (std::vector<std::string>{"a", "g1", "g2", "g5"}));
}

}  // namespace
}  // namespace kiln
