// The float rewrites `kiln quantize` makes first (frontend/quantize/float_rewrites.h) leave the model
// computing what it computed: checked with the reference interpreter before and after.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>

#include "frontend/onnx/onnx_import.h"
#include "frontend/passes/bind_input_shapes.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/quantize/float_rewrites.h"
#include "frontend/reference/interpreter.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

using Ints = std::vector<int64_t>;

Graph inferred(const std::string& bytes) {
  Graph g = import_onnx_bytes(bytes, "test");
  bind_input_shapes(g, {});
  infer_shapes(g);
  return g;
}

TEST(FloatRewrites, AnInferenceBatchNormIsFoldedIntoTheConvBeforeIt) {
  ModelBuilder b("conv_bn", 13);
  b.input("x", DType::Float32, Shape{1, 3, 6, 6});
  b.initializer("w", testing::random_weights({4, 3, 3, 3}, 1));
  b.initializer("cb", testing::random_weights({4}, 2));
  b.initializer("gamma", testing::random_weights({4}, 3));
  b.initializer("beta", testing::random_weights({4}, 4));
  b.initializer("mean", testing::random_weights({4}, 5));
  Tensor var = testing::random_weights({4}, 6);
  for (int64_t c = 0; c < 4; ++c) var.set_double(c, std::fabs(var.get_double(c)) + 0.1);
  b.initializer("var", var);
  b.node("Conv", {"x", "w", "cb"}, {"c"}, "conv");
  b.node("BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"y"}, "bn").attr("epsilon", 1e-3);
  b.output("y", DType::Float32, Shape{1, 4, 4, 4});
  onnx::ModelProto m = b.proto();
  const std::vector<std::string> log = conv_bn_to_conv(*m.mutable_graph());
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0], "conv_bn_to_conv: BatchNormalization 'bn' is folded into Conv 'conv'");
  ASSERT_EQ(m.graph().node_size(), 1);
  EXPECT_EQ(m.graph().node(0).output(0), "y");
  EXPECT_EQ(m.graph().initializer_size(), 2);  // the folded weight and bias; the rest dropped
  std::string bytes;
  m.SerializeToString(&bytes);
  const Tensor x = testing::random_weights({1, 3, 6, 6}, 7);
  const Tensor want = run_reference(inferred(b.serialize()), {{"x", x}})[0];
  const Tensor got = run_reference(inferred(bytes), {{"x", x}})[0];
  for (int64_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got.get_double(i), want.get_double(i), 1e-5) << i;
}

TEST(FloatRewrites, ABatchNormReadingAnythingElseOrKeepingStatisticsStays) {
  ModelBuilder b("conv_bn_out", 13);
  b.input("x", DType::Float32, Shape{1, 2, 4, 4});
  b.initializer("w", testing::random_weights({2, 2, 1, 1}, 1));
  for (const char* n : {"gamma", "beta", "mean", "var"}) b.initializer(n, Tensor::from_doubles(DType::Float32, {2}, std::vector<double>{1, 1}));
  b.node("Conv", {"x", "w"}, {"c"});
  b.node("BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"y"});
  b.output("y", DType::Float32, Shape{1, 2, 4, 4});
  b.output("c", DType::Float32, Shape{1, 2, 4, 4});  // the conv's own output is read too
  onnx::ModelProto m = b.proto();
  EXPECT_TRUE(conv_bn_to_conv(*m.mutable_graph()).empty());
  EXPECT_EQ(m.graph().node_size(), 2);
}

// PyTorch's conv -> max pool -> relu: the Relu moves before the pool (under a new value name), and the
// model computes exactly what it did, on inputs of both signs.
TEST(FloatRewrites, AReluAfterAMaxPoolRunsBeforeIt) {
  ModelBuilder b("pool_relu", 13);
  b.input("x", DType::Float32, Shape{1, 2, 6, 6});
  b.initializer("w", testing::random_weights({3, 2, 3, 3}, 1));
  b.node("Conv", {"x", "w"}, {"c"}, "conv");
  b.node("MaxPool", {"c"}, {"p"}, "pool").attr("kernel_shape", Ints{2, 2}).attr("strides", Ints{2, 2}).attr("pads", Ints{1, 1, 1, 1});
  b.node("Relu", {"p"}, {"y"}, "relu");
  b.output("y", DType::Float32, Shape{1, 3, 4, 4});
  onnx::ModelProto m = b.proto();
  const std::vector<std::string> log = relu_before_max_pool(*m.mutable_graph());
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0], "relu_before_max_pool: Relu 'relu' runs before MaxPool 'pool'");
  ASSERT_EQ(m.graph().node_size(), 3);
  EXPECT_EQ(m.graph().node(1).op_type(), "Relu");
  EXPECT_EQ(m.graph().node(1).input(0), "c");
  EXPECT_EQ(m.graph().node(2).op_type(), "MaxPool");
  EXPECT_EQ(m.graph().node(2).output(0), "y");
  std::string bytes;
  m.SerializeToString(&bytes);
  const Tensor x = testing::random_weights({1, 2, 6, 6}, 7);
  const Tensor want = run_reference(inferred(b.serialize()), {{"x", x}})[0];
  const Tensor got = run_reference(inferred(bytes), {{"x", x}})[0];
  ASSERT_EQ(got.size(), want.size());
  int zeros = 0;
  for (int64_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got.get_double(i), want.get_double(i)) << i;
    zeros += want.get_double(i) == 0;
  }
  EXPECT_GT(zeros, 0);  // the Relu clipped something, so the test sees both signs
}

// A pool whose windows may lie wholly in the padding (-inf before a Relu, 0 after), one with ceil mode,
// or one whose input something else reads too: the Relu stays after it.
TEST(FloatRewrites, AReluStaysAfterAPoolItDoesNotCommuteWithOrWouldNotFollowAConv) {
  auto model = [](Ints pads, int64_t ceil, bool input_read_twice) {
    ModelBuilder b("pool_relu", 13);
    b.input("x", DType::Float32, Shape{1, 2, 6, 6});
    b.node("Neg", {"x"}, {"c"});
    b.node("MaxPool", {"c"}, {"p"}).attr("kernel_shape", Ints{2, 2}).attr("pads", pads).attr("ceil_mode", ceil);
    b.node("Relu", {"p"}, {"y"});
    b.output("y", DType::Float32, Shape{});
    if (input_read_twice) b.output("c", DType::Float32, Shape{1, 2, 6, 6});
    return b.proto();
  };
  for (onnx::ModelProto m : {model({2, 0, 0, 0}, 0, false), model({0, 0, 0, 0}, 1, false), model({0, 0, 0, 0}, 0, true)})
    EXPECT_TRUE(relu_before_max_pool(*m.mutable_graph()).empty());
  onnx::ModelProto m = model({1, 1, 1, 1}, 0, false);
  EXPECT_EQ(relu_before_max_pool(*m.mutable_graph()).size(), 1u);
}

}  // namespace
}  // namespace kiln
