// The zoo's int8 keyword spotter (frontend/zoo/ds_cnn_int8.cc) in its two forms: QOperator (QLinearConv,
// QLinearMatMul) and QDQ (DequantizeLinear -> Conv/MatMul -> QuantizeLinear). Same numbers, so the
// same words; DS-CNN small's size; and logits that are not one saturated value.
#include <gtest/gtest.h>

#include <set>

#include "frontend/reference/interpreter.h"
#include "frontend/zoo/zoo.h"
#include "tests/frontend/test_models.h"
#include "toolchain/inspect.h"

namespace kiln {
namespace {

TEST(ZooDsCnn, TheQOperatorFormHasDsCnnSmallsSizeInInt8) {
  ModelBuilder b = build_zoo_model("ds_cnn_int8", {});
  testing::TempDir dir;
  b.save(dir.path("m.onnx"));
  const ModelSummary s = summarize_model(dir.path("m.onnx"), {});
  // conv1 64x1x10x4, four blocks of a 64x1x3x3 depthwise and a 64x64 pointwise, the 64x12 classifier.
  const int64_t weights = 64 * 40 + 4 * (64 * 9 + 64 * 64) + 64 * 12;
  const int64_t per_channel = 9 * 64 * 3;  // each conv's int32 bias, weight scales and zero points
  EXPECT_GE(s.parameters, weights + per_channel);
  EXPECT_LT(s.parameters, weights + per_channel + 20);  // shared scalar scales and zero points, a shape
  EXPECT_EQ(testing::op_types(testing::prepared_graph(b)).size(), 16u);
}

TEST(ZooDsCnn, BothFormsGiveTheSameSpreadOutLogits) {
  ModelBuilder qop = build_zoo_model("ds_cnn_int8", {}), qdq = build_zoo_model("ds_cnn_qdq", {});
  const Graph g1 = testing::prepared_graph(qop), g2 = testing::prepared_graph(qdq);
  const std::vector<std::string> ops = testing::op_types(g2);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "Conv"), 9);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "QLinearConv"), 0);
  for (uint32_t seed : {1u, 2u, 3u}) {
    const Tensor x = testing::random_weights({1, 1, 49, 10}, seed);
    const Tensor a = run_reference(g1, {{"mfcc", x}})[0], b = run_reference(g2, {{"mfcc", x}})[0];
    ASSERT_EQ(a.size(), 12);
    std::set<double> distinct;
    for (int64_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a.get_double(i), b.get_double(i)) << "seed " << seed << " word " << i;
      distinct.insert(a.get_double(i));
    }
    EXPECT_GE(distinct.size(), 5u) << "the logits collapsed (seed " << seed << ")";
  }
}

}  // namespace
}  // namespace kiln
