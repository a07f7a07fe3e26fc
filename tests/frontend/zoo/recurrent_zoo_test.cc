// The zoo's recurrent models: the keyword spotter (frontend/zoo/lstm_kws.cc), whose size is two LSTMs'
// and a classifier's and whose reference gives each frame sequence its own distribution over the 12
// words; the Loop-refinement model (gru_refine.cc), whose iterations share one set of weights.
#include <gtest/gtest.h>

#include <cmath>

#include "frontend/reference/interpreter.h"
#include "frontend/zoo/zoo.h"
#include "tests/frontend/test_models.h"
#include "toolchain/inspect.h"
#include "toolchain/pipeline.h"

namespace kiln {
namespace {

TEST(ZooLstmKws, HasTheSizeOfTwoLstmsAndAClassifier) {
  ZooOptions o;
  o.seq = 49;
  ModelBuilder b = build_zoo_model("lstm_kws", o);
  testing::TempDir dir;
  b.save(dir.path("kws.onnx"));
  const ModelSummary s = summarize_model(dir.path("kws.onnx"), {});
  // Per LSTM: W (4H x in), R (4H x H), B (8H); then the Gemm; 2 Squeeze axes and a Reshape shape.
  const int64_t h = 128, lstm1 = 4 * h * 40 + 4 * h * h + 8 * h, lstm2 = 4 * h * h + 4 * h * h + 8 * h;
  EXPECT_EQ(s.parameters, lstm1 + lstm2 + 12 * h + 12 + 1 + 2);
  ASSERT_EQ(s.outputs.size(), 1u);
  EXPECT_EQ(s.outputs[0].shape, (Shape{1, 12}));
}

TEST(ZooLstmKws, EachSequenceGetsItsOwnDistribution) {
  ZooOptions o;
  o.seq = 6;
  ModelBuilder b = build_zoo_model("lstm_kws", o);
  const Graph g = testing::prepared_graph(b);
  std::vector<double> first;
  for (uint32_t seed : {1u, 2u}) {
    const Tensor p = run_reference(g, {{"features", testing::random_weights({6, 1, 40}, seed)}})[0];
    double sum = 0;
    for (int64_t i = 0; i < p.size(); ++i) sum += p.get_double(i);
    EXPECT_NEAR(sum, 1.0, 1e-6);
    if (first.empty()) first = p.to_doubles();
    else EXPECT_NE(first, p.to_doubles());
  }
}

TEST(ZooGruRefine, EightIterationsShareOneSetOfWeights) {
  ModelBuilder b = build_zoo_model("gru_refine", {});
  testing::TempDir dir;
  b.save(dir.path("refine.onnx"));
  const ModelSummary s = summarize_model(dir.path("refine.onnx"), {});
  // Three 3x3 GRU convs of 64 -> 32 channels, the head's 32 -> 32 and 32 -> 2, with biases; the
  // zero initial state (32 x 16 x 16); one stacking axis per iteration's scan value.
  const int64_t gates = 3 * (64 * 32 * 9 + 32), head = 32 * 32 * 9 + 32 + 2 * 32 * 9 + 2;
  EXPECT_EQ(s.parameters, gates + head + 32 * 16 * 16 + 8);
  ASSERT_EQ(s.outputs.size(), 2u);
  EXPECT_EQ(s.outputs[1].shape, (Shape{8, 1, 2, 16, 16}));
  // Every iteration's convs: 2 * (3 * 64 * 32 + 32 * 32 + 32 * 2) * 9 multiply-adds per pixel.
  EXPECT_GT(s.flops, 8 * 2.0 * (3 * 64 * 32 + 32 * 32 + 32 * 2) * 9 * 256);
}

}  // namespace
}  // namespace kiln
