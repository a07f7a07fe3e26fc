// The dcgan and bert_base zoo models: the published sizes (parameters, FLOPs as `kiln inspect` counts
// them), libonnx's checker (the importer runs it on every opset-17 model), reference runs at small
// sizes, and deterministic bytes. docs/zoo-dcgan-bert.md derives the expected numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>

#include "frontend/ir/error.h"
#include "frontend/reference/interpreter.h"
#include "frontend/zoo/bert.h"
#include "frontend/zoo/weights.h"
#include "frontend/zoo/zoo.h"
#include "tests/frontend/test_models.h"
#include "toolchain/inspect.h"
#include "toolchain/pipeline.h"

namespace kiln {
namespace {

ModelSummary inspect(const ModelBuilder& b, const testing::TempDir& dir) {
  std::string path = dir.path("model.onnx");
  b.save(path);
  return summarize_model(path, {});
}

std::vector<Tensor> run(const ModelBuilder& b, const testing::TempDir& dir, const std::map<std::string, Tensor>& inputs) {
  std::string path = dir.path("run.onnx");
  b.save(path);
  return run_reference(load_model(path, {}), inputs);
}

Tensor ints(Shape shape, std::vector<int64_t> values) { return Tensor::from_ints(DType::Int64, std::move(shape), values); }

struct Moments {
  double mean = 0, stddev = 0, max_abs = 0;
  bool finite = true;
};

Moments moments(const Tensor& t) {
  Moments m;
  double sum = 0, sum_sq = 0;
  for (int64_t i = 0; i < t.size(); ++i) {
    double v = t.get_double(i);
    m.finite = m.finite && std::isfinite(v);
    sum += v;
    sum_sq += v * v;
    m.max_abs = std::max(m.max_abs, std::fabs(v));
  }
  double n = static_cast<double>(t.size());
  m.mean = sum / n;
  m.stddev = std::sqrt(std::max(0.0, sum_sq / n - m.mean * m.mean));
  return m;
}

// ---- dcgan ----------------------------------------------------------------------------------------

TEST(ZooDcgan, ParametersAndFlopsAreTheGeneratorsOwn) {
  testing::TempDir dir;
  ModelSummary s = inspect(build_zoo_model("dcgan", {}), dir);
  // Channels in and out, input and output side, per transposed convolution; 4x4 kernels.
  struct Layer { double in, out, in_side, out_side; };
  const Layer layers[] = {{100, 512, 1, 4}, {512, 256, 4, 8}, {256, 128, 8, 16}, {128, 64, 16, 32}, {64, 3, 32, 64}};
  double weights = 0, macs = 0, normalised = 0;
  for (const Layer& l : layers) {
    weights += l.in * l.out * 16;
    macs += l.in_side * l.in_side * l.in * l.out * 16;  // every input pixel scatters the whole kernel
    if (l.out != 3) normalised += l.out_side * l.out_side * l.out;
  }
  EXPECT_EQ(weights, 3574784);
  EXPECT_EQ(macs, 104628224);
  EXPECT_EQ(s.parameters, weights + 4 * (512 + 256 + 128 + 64));  // + BN scale, bias, mean, variance
  EXPECT_NEAR(static_cast<double>(s.parameters), 3.58e6, 0.01 * 3.58e6);
  // BN is 4 FLOPs an element and Relu 1; the Tanh is 1 an output element.
  EXPECT_EQ(s.flops, 2 * macs + 5 * normalised + 3 * 64 * 64);
  ASSERT_EQ(s.outputs.size(), 1u);
  EXPECT_EQ(s.outputs[0].shape, (Shape{1, 3, 64, 64}));
}

TEST(ZooDcgan, ReferenceRunDrawsBoundedDistinctImages) {
  testing::TempDir dir;
  ZooOptions o;
  o.batch = 2;
  WeightInit noise(7);
  double unit = std::sqrt(3.0);  // uniform noise with unit variance, as the generator is trained on
  auto y = run(build_zoo_model("dcgan", o), dir, {{"noise", noise.uniform_tensor({2, 100, 1, 1}, -unit, unit)}});
  ASSERT_EQ(y.size(), 1u);
  ASSERT_EQ(y[0].shape(), (Shape{2, 3, 64, 64}));
  Moments m = moments(y[0]);
  EXPECT_TRUE(m.finite);
  EXPECT_LT(m.max_abs, 1.0);
  EXPECT_GT(m.stddev, 0.2) << "the image should use the tanh's range, not sit at 0";
  // The two noise vectors give different images.
  int64_t half = y[0].size() / 2, differing = 0;
  for (int64_t i = 0; i < half; ++i) differing += std::fabs(y[0].get_double(i) - y[0].get_double(half + i)) > 1e-3;
  EXPECT_GT(differing, half / 2);
}

TEST(ZooDcgan, TheSeedFixesTheBytes) {
  ZooOptions a, b;
  b.seed = 2;
  EXPECT_EQ(build_zoo_model("dcgan", a).serialize(), build_zoo_model("dcgan", a).serialize());
  EXPECT_NE(build_zoo_model("dcgan", a).serialize(), build_zoo_model("dcgan", b).serialize());
}

// ---- bert -----------------------------------------------------------------------------------------

// BERT-base's parameters with every table counted whole (the figure Hugging Face reports).
constexpr double kH = 768, kF = 3072, kLayers = 12;
constexpr double kBertBaseTrainable = (30522 + 512 + 2 + 2) * kH                                     // embeddings + LN
                                      + kLayers * (4 * (kH * kH + kH) + 2 * kH * kF + kF + kH + 4 * kH)  // layers
                                      + kH * kH + kH;                                                  // pooler

TEST(ZooBert, BaseHasThePublishedSize) {
  EXPECT_EQ(kBertBaseTrainable, 109482240);
  testing::TempDir dir;
  ModelSummary s = inspect(build_zoo_model("bert_base", {}), dir);
  const double L = 128;
  // kiln counts the constants run-time nodes read: the position table folds to its first L rows and
  // the segment table to row 0 (no token_type_ids input); 12 scalars and shapes come on top.
  EXPECT_EQ(s.parameters, kBertBaseTrainable - (512 - L) * kH - kH + 12);
  EXPECT_NEAR(static_cast<double>(s.parameters), 110e6, 0.01 * 110e6);
  // Matrix products: 4 HxH and 2 HxF per token and layer, q k^T and probs v per head, the pooler.
  double matmuls = 2 * L * kLayers * (4 * kH * kH + 2 * kH * kF) + kLayers * 2 * 2 * L * L * kH + 2 * kH * kH;
  EXPECT_EQ(matmuls, 22348431360);
  // Everything else, per element: bias adds (6 per layer + pooler), residual adds, 2 LayerNorms (7
  // each), GELU (5 on the FFN's width), score scale + softmax (1 + 5); embeddings: 2 adds + LN, tanh.
  double per_layer = L * (4 * kH + kF + kH) + 2 * L * kH + 2 * 7 * L * kH + 5 * L * kF + 12 * L * L * 6;
  double others = kLayers * per_layer + 2 * L * kH + 7 * L * kH + kH + kH;
  EXPECT_EQ(s.flops, matmuls + others);
  EXPECT_NEAR(s.flops, 22.5e9, 0.01 * 22.5e9);
  ASSERT_EQ(s.outputs.size(), 2u);
  EXPECT_EQ(s.outputs[0].shape, (Shape{1, 128, 768}));
  EXPECT_EQ(s.outputs[1].shape, (Shape{1, 768}));
}

TEST(ZooBert, BaseRunsThroughTheReferenceAtShortSequences) {
  // The real model, written by the CLI with --seq and --batch; the reference runs 8 tokens.
  testing::TempDir dir;
  std::string path = dir.path("bert.onnx");
  std::string cmd = std::string(KILN_BINARY) + " zoo bert_base --seq 8 --batch 2 -o " + path;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::vector<int64_t> ids = {101, 7592, 2088, 999, 102, 0, 0, 0, 101, 2023, 2003, 1037, 3231, 1012, 102, 0};
  auto y = run_reference(load_model(path, {}), {{"input_ids", ints({2, 8}, ids)}});
  ASSERT_EQ(y.size(), 2u);
  ASSERT_EQ(y[0].shape(), (Shape{2, 8, 768}));
  ASSERT_EQ(y[1].shape(), (Shape{2, 768}));
  Moments hidden = moments(y[0]), pooled = moments(y[1]);
  EXPECT_TRUE(hidden.finite);
  EXPECT_TRUE(pooled.finite);
  // LayerNorm output: near zero mean and unit spread (scale ~1, shift ~0).
  EXPECT_NEAR(hidden.mean, 0, 0.05);
  EXPECT_NEAR(hidden.stddev, 1, 0.15);
  EXPECT_LT(pooled.max_abs, 1.0);
  EXPECT_GT(pooled.stddev, 0.1);
}

// A small BERT with both optional inputs, fast enough to run a few times.
BertConfig small_bert() {
  BertConfig c;
  c.layers = 2;
  c.hidden = 64;
  c.heads = 4;
  c.ffn = 256;
  c.vocab = 1000;
  c.max_positions = 32;
  c.token_type_ids_input = true;
  c.attention_mask_input = true;
  return c;
}

TEST(ZooBert, MaskedPositionsDoNotReachTheOthers) {
  testing::TempDir dir;
  ZooOptions o;
  o.seq = 6;
  ModelBuilder b = build_bert(small_bert(), o);
  auto mask = ints({1, 6}, {1, 1, 1, 1, 0, 0});
  auto types = ints({1, 6}, {0, 0, 0, 1, 1, 1});
  auto y = run(b, dir, {{"input_ids", ints({1, 6}, {5, 17, 3, 9, 42, 0})}, {"token_type_ids", types}, {"attention_mask", mask}});
  // Another token in a padded slot: the unpadded tokens' states stay exactly as they were.
  auto y_pad = run(b, dir, {{"input_ids", ints({1, 6}, {5, 17, 3, 9, 999, 0})}, {"token_type_ids", types}, {"attention_mask", mask}});
  // Another segment for token 1: its state changes, and through attention the others' too.
  auto y_seg = run(b, dir, {{"input_ids", ints({1, 6}, {5, 17, 3, 9, 42, 0})}, {"token_type_ids", ints({1, 6}, {0, 1, 0, 1, 1, 1})}, {"attention_mask", mask}});
  ASSERT_EQ(y[0].shape(), (Shape{1, 6, 64}));
  // Largest change between two runs' hidden states over tokens [first, last).
  auto largest_change = [](const Tensor& a, const Tensor& b, int64_t first, int64_t last) {
    double largest = 0;
    for (int64_t i = first * 64; i < last * 64; ++i) largest = std::max(largest, std::fabs(a.get_double(i) - b.get_double(i)));
    return largest;
  };
  EXPECT_LT(largest_change(y[0], y_pad[0], 0, 4), 1e-5);
  EXPECT_GT(largest_change(y[0], y_pad[0], 4, 5), 1e-2);
  EXPECT_GT(largest_change(y[0], y_seg[0], 0, 1), 1e-3);
}

TEST(ZooBert, TheSeedFixesTheBytes) {
  ZooOptions a, b;
  a.seq = b.seq = 4;
  b.seed = 5;
  EXPECT_EQ(build_bert(small_bert(), a).serialize(), build_bert(small_bert(), a).serialize());
  EXPECT_NE(build_bert(small_bert(), a).serialize(), build_bert(small_bert(), b).serialize());
}

TEST(ZooBert, SequenceLongerThanThePositionTableIsAnError) {
  ZooOptions o;
  o.seq = 513;
  EXPECT_THROW(build_zoo_model("bert_base", o), Error);
  o.seq = 0;
  EXPECT_THROW(build_zoo_model("bert_base", o), Error);
  std::string cmd = std::string(KILN_BINARY) + " zoo bert_base --seq 600 -o /dev/null >/dev/null 2>&1";
  int status = std::system(cmd.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 2);
}

}  // namespace
}  // namespace kiln
