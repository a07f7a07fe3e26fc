// The CNN zoo models (ResNet-18/50, MobileNetV2, R3D-18) and the single-op benchmark models: what
// `kiln inspect` reports against the published parameter and multiply-add counts, ONNX validity,
// determinism, and finite, non-degenerate outputs from the reference interpreter at small sizes.
#include <gtest/gtest.h>
#include <onnx/checker.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <set>

#include "frontend/ir/error.h"
#include "frontend/ops/op_registry.h"
#include "frontend/reference/interpreter.h"
#include "frontend/zoo/zoo.h"
#include "tests/frontend/test_models.h"
#include "toolchain/inspect.h"
#include "toolchain/pipeline.h"
#include "toolchain/run_model.h"

namespace kiln {
namespace {

struct Published {
  const char* model;
  int64_t params;  // torchvision's count: trainable parameters, so without BN running statistics
  double macs;     // torchvision's "GFLOPS" column, which counts multiply-adds (fvcore convention)
};

// torchvision.models docs (weights tables): resnet18 / resnet50 / resnext50_32x4d / inception_v3
// (IMAGENET1K_V1), mobilenet_v2,
// video.r3d_18 (KINETICS400_V1, for 16x112x112 clips).
const Published kPublished[] = {
    {"resnet18", 11689512, 1.81e9},
    {"resnet50", 25557032, 4.09e9},
    {"resnext50", 25028904, 4.23e9},  // resnext50_32x4d
    // inception_v3 at 299 x 299: torchvision's 27161264 parameters less the auxiliary classifier's
    // 3326696, which inference does not run (conv0 1x1 768->128 + BN, conv1 5x5 128->768 + BN,
    // fc 768->1000); its 5.71 GFLOPS column is for inference.
    {"inception_v3", 23834568, 5.71e9},
    {"mobilenet_v2", 3504872, 0.30e9},
    // NASNet-A Mobile (4 @ 1056): the paper's 5.3 M parameters and 564 M multiply-adds; the exact
    // count is the PyTorch port's (Cadene's pretrainedmodels nasnetamobile).
    {"nasnet_mobile", 5289978, 0.564e9},
    {"resnet3d18", 33371472, 40.70e9},
};

// What kiln counts but torchvision does not: BN running mean/var, ReLU6's two Clip bounds and the
// index tensors of Pad and Slice are constants read at run time, so `kiln inspect` includes them in
// its parameters.
struct GraphBreakdown {
  int64_t non_trainable_constants = 0;
  double conv_and_gemm_flops = 0;
};

GraphBreakdown breakdown(const Graph& g) {
  GraphBreakdown r;
  std::set<std::string> counted;
  auto count_constant = [&](const std::string& name) {
    if (counted.insert(name).second) r.non_trainable_constants += g.value(name).constant->size();
  };
  for (const Node& n : g.nodes) {
    if (n.op_type == "BatchNormalization") {
      count_constant(n.inputs[3]);
      count_constant(n.inputs[4]);
    }
    if (n.op_type == "Clip") {
      count_constant(n.inputs[1]);
      count_constant(n.inputs[2]);
    }
    if (n.op_type == "Pad" || n.op_type == "Slice")
      for (size_t i = 1; i < n.inputs.size(); ++i) count_constant(n.inputs[i]);
    if (n.op_type == "Conv" || n.op_type == "Gemm") {
      NodeShapes s{n, {}, {}};
      for (const auto& in : n.inputs) s.in.push_back(g.value(in).shape);
      for (const auto& out : n.outputs) s.out.push_back(g.value(out).shape);
      r.conv_and_gemm_flops += find_op(n.domain, n.op_type)->flops(s);
    }
  }
  return r;
}

class PublishedCnn : public ::testing::TestWithParam<Published> {};

TEST_P(PublishedCnn, InspectMatchesPublishedParamsAndMacs) {
  const Published& pub = GetParam();
  ModelBuilder b = build_zoo_model(pub.model, ZooOptions{});
  EXPECT_NO_THROW(onnx::checker::check_model(b.proto()));
  testing::TempDir dir;
  const std::string path = dir.path("model.onnx");
  b.save(path);

  ModelSummary s = summarize_model(path, {});  // imports with libonnx's checker on (opset 17, IR 8)
  EXPECT_EQ(s.opset, 17);
  GraphBreakdown parts = breakdown(load_model(path, {}));
  EXPECT_EQ(s.parameters - parts.non_trainable_constants, pub.params);
  EXPECT_NEAR(static_cast<double>(s.parameters), static_cast<double>(pub.params), 0.01 * pub.params);
  // Convs and the classifier are the published count (2 FLOPs per multiply-add in kiln) ...
  EXPECT_NEAR(parts.conv_and_gemm_flops, 2 * pub.macs, 0.01 * 2 * pub.macs);
  // ... and BN, activations, adds and pooling, which kiln also counts, add a few percent at most.
  EXPECT_GE(s.flops, parts.conv_and_gemm_flops);
  EXPECT_LE(s.flops, 1.06 * parts.conv_and_gemm_flops);
}

INSTANTIATE_TEST_SUITE_P(CnnZoo, PublishedCnn, ::testing::ValuesIn(kPublished),
                         [](const auto& info) { return std::string(info.param.model); });

// A re-parameterizable network's deploy form, counted from the training form the zoo writes: the
// convs `kept` picks, each with a bias, and the classifier (a Gemm with transB, like a conv).
struct DeployForm {
  double params = 0, macs = 0;
  int convs = 0;
  Graph graph;
};
DeployForm deploy_form(const std::string& model, const std::function<bool(const Graph&, const Node&)>& kept) {
  testing::TempDir dir;
  const std::string path = dir.path("model.onnx");
  build_zoo_model(model, ZooOptions{}).save(path);
  DeployForm d;
  d.graph = load_model(path, {});
  for (const Node& n : d.graph.nodes) {
    const bool conv = n.op_type == "Conv" && kept(d.graph, n);
    if (!conv && n.op_type != "Gemm") continue;
    const Shape& w = d.graph.value(n.inputs[1]).shape;
    const auto out_channels = static_cast<double>(w[0]);
    d.params += static_cast<double>(num_elements(w)) + out_channels;
    d.macs += static_cast<double>(num_elements(w)) * static_cast<double>(num_elements(d.graph.value(n.outputs[0]).shape)) / out_channels;
    d.convs += conv;
  }
  return d;
}

// RepVGG-A0 (Ding et al., CVPR 2021, table 4) publishes its deploy form: 8.30 M parameters and
// 1.4 G multiply-adds ("FLOPs" there) at 224 x 224. Its deploy form is one 3x3 conv with a bias per
// block, and the classifier.
TEST(CnnZoo, RepVggA0sDeployFormIsThePublishedOne) {
  const DeployForm d = deploy_form("repvgg_a0", [](const Graph& g, const Node& n) { return g.value(n.inputs[1]).shape[2] == 3; });
  EXPECT_EQ(d.convs, 22);
  EXPECT_NEAR(d.params, 8.30e6, 0.005 * 8.30e6);
  EXPECT_NEAR(d.macs, 1.4e9, 0.05 * 1.4e9);
}

// MobileOne-S0 (Vasu et al., CVPR 2023, table 4) publishes its deploy form: 2.1 M parameters and
// 275 M multiply-adds at 224 x 224. The zoo writes four conv branches per block (one in the stem)
// besides the 1x1 and skip branches; the deploy form is each block's first conv branch with a
// bias, and the classifier.
TEST(CnnZoo, MobileOneS0sDeployFormIsThePublishedOne) {
  auto branch = [](const Node& n, const std::string& which) { return n.outputs[0].find(".rbr_conv." + which) != std::string::npos; };
  const DeployForm d = deploy_form("mobileone_s0", [&](const Graph&, const Node& n) { return branch(n, "0."); });
  const auto branches = std::count_if(d.graph.nodes.begin(), d.graph.nodes.end(),
                                      [&](const Node& n) { return n.op_type == "Conv" && branch(n, ""); });
  EXPECT_EQ(d.convs, 1 + 2 * (2 + 8 + 10 + 1));
  EXPECT_EQ(branches, 1 + 4 * 2 * (2 + 8 + 10 + 1));
  EXPECT_NEAR(d.params, 2.1e6, 0.03 * 2.1e6);
  EXPECT_NEAR(d.macs, 275e6, 0.02 * 275e6);
}

struct SmallRun {
  const char* model;
  int64_t size;
  int64_t classes;
};

class CnnReference : public ::testing::TestWithParam<SmallRun> {};

// Small inputs keep the double-precision reference fast; the scales the weights are drawn with are
// what keeps 18-50 layers of activations O(1), and that does not depend on the resolution.
TEST_P(CnnReference, OutputsAreFiniteBoundedAndInputDependent) {
  const SmallRun& r = GetParam();
  ZooOptions o;
  o.batch = 2;
  o.size = r.size;
  testing::TempDir dir;
  const std::string path = dir.path("model.onnx");
  build_zoo_model(r.model, o).save(path);
  Graph g = load_model(path, {});
  std::map<std::string, Tensor> inputs;
  for (size_t i = 0; i < g.inputs.size(); ++i) inputs[g.inputs[i]] = seeded_input(g.value(g.inputs[i]), 1, i);
  std::vector<Tensor> out = run_reference(g, inputs);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].shape(), (Shape{2, r.classes}));
  double sum = 0, sum_sq = 0, max_abs = 0, batch_diff = 0;
  for (int64_t i = 0; i < out[0].size(); ++i) {
    double v = out[0].get_double(i);
    ASSERT_TRUE(std::isfinite(v)) << "logit " << i;
    sum += v;
    sum_sq += v * v;
    max_abs = std::max(max_abs, std::abs(v));
    if (i < r.classes) batch_diff = std::max(batch_diff, std::abs(v - out[0].get_double(i + r.classes)));
  }
  double n = static_cast<double>(out[0].size());
  double stddev = std::sqrt(std::max(0.0, sum_sq / n - (sum / n) * (sum / n)));
  EXPECT_LT(max_abs, 50.0);
  EXPECT_GT(stddev, 0.05);       // the logits are not a constant
  EXPECT_GT(batch_diff, 1e-3);   // and depend on the image
}

INSTANTIATE_TEST_SUITE_P(CnnZoo, CnnReference,
                         ::testing::Values(SmallRun{"resnet18", 32, 1000}, SmallRun{"resnet50", 32, 1000}, SmallRun{"resnext50", 32, 1000}, SmallRun{"inception_v3", 75, 1000},
                                           SmallRun{"mobilenet_v2", 32, 1000}, SmallRun{"resnet3d18", 8, 400},
                                           SmallRun{"repvgg_a0", 32, 1000}, SmallRun{"mobileone_s0", 32, 1000}),
                         [](const auto& info) { return std::string(info.param.model); });

TEST(CnnZoo, SameSeedSameBytes) {
  ZooOptions o;
  o.size = 32;
  std::string first = build_zoo_model("mobilenet_v2", o).serialize();
  EXPECT_EQ(first, build_zoo_model("mobilenet_v2", o).serialize());
  o.seed = 2;
  EXPECT_NE(first, build_zoo_model("mobilenet_v2", o).serialize());
}

ModelSummary inspect_zoo(const std::string& name, const ZooOptions& o, testing::TempDir& dir) {
  ModelBuilder b = build_zoo_model(name, o);
  onnx::checker::check_model(b.proto());
  b.save(dir.path(name + ".onnx"));
  return summarize_model(dir.path(name + ".onnx"), {});
}

TEST(SingleOpZoo, DefaultsAreThePaperLayers) {
  testing::TempDir dir;
  ModelSummary mm = inspect_zoo("matmul", {}, dir);
  EXPECT_EQ(mm.inputs[0].shape, (Shape{1024, 1024}));
  EXPECT_EQ(mm.parameters, 1024 * 1024);
  EXPECT_EQ(mm.flops, 2.0 * 1024 * 1024 * 1024);

  ModelSummary conv = inspect_zoo("conv2d", {}, dir);
  EXPECT_EQ(conv.inputs[0].shape, (Shape{1, 64, 56, 56}));
  EXPECT_EQ(conv.outputs[0].shape, (Shape{1, 64, 56, 56}));
  EXPECT_EQ(conv.parameters, 64 * 64 * 9);
  EXPECT_EQ(conv.flops, 2.0 * 64 * 56 * 56 * 64 * 9);

  ModelSummary dw = inspect_zoo("depthwise", {}, dir);
  EXPECT_EQ(dw.inputs[0].shape, (Shape{1, 128, 56, 56}));
  EXPECT_EQ(dw.outputs[0].shape, (Shape{1, 128, 56, 56}));
  EXPECT_EQ(dw.parameters, 128 * 9);
  EXPECT_EQ(dw.flops, 2.0 * 128 * 56 * 56 * 9);
}

// dcgan's fourth layer with its kernel, stride and pads: every input pixel scatters the whole kernel.
TEST(SingleOpZoo, ConvTransposeIsDcgansFourthLayer) {
  testing::TempDir dir;
  ZooOptions o;
  o.kernel = 4;
  o.stride = 2;
  o.padding = 1;
  ModelSummary ct = inspect_zoo("conv_transpose2d", o, dir);
  EXPECT_EQ(ct.inputs[0].shape, (Shape{1, 128, 16, 16}));
  EXPECT_EQ(ct.outputs[0].shape, (Shape{1, 64, 32, 32}));
  EXPECT_EQ(ct.parameters, 128 * 64 * 16);
  EXPECT_EQ(ct.flops, 2.0 * 128 * 64 * 16 * 16 * 16);
  o.padding = 20;  // the pads crop more than the 34 positions the kernel covers
  EXPECT_THROW(build_zoo_model("conv_transpose2d", o), Error);
}

// YOLOX's largest SPP pool on its 13x13 input; the kernel, stride and pads from the options.
TEST(SingleOpZoo, MaxPoolIsYoloxsLargestSppPool) {
  testing::TempDir dir;
  ZooOptions o;
  o.kernel = 13;
  o.padding = 6;
  ModelSummary pool = inspect_zoo("maxpool2d", o, dir);
  EXPECT_EQ(pool.inputs[0].shape, (Shape{1, 128, 13, 13}));
  EXPECT_EQ(pool.outputs[0].shape, (Shape{1, 128, 13, 13}));
  EXPECT_EQ(pool.parameters, 0);
  o.stride = 2;
  o.padding = 0;
  o.size = 27;
  EXPECT_EQ(inspect_zoo("maxpool2d", o, dir).outputs[0].shape, (Shape{1, 128, 8, 8}));
  o.padding = 13;  // a window entirely in the padding
  EXPECT_THROW(build_zoo_model("maxpool2d", o), Error);
  o.padding = 0;
  o.size = 12;  // smaller than the kernel
  EXPECT_THROW(build_zoo_model("maxpool2d", o), Error);
}

TEST(SingleOpZoo, ShapesFollowTheOptions) {
  testing::TempDir dir;
  ZooOptions o;
  o.batch = 2;
  o.in_channels = 3;
  o.out_channels = 8;
  o.size = 10;
  o.kernel = 3;
  o.stride = 2;
  o.padding = 0;
  ModelSummary conv = inspect_zoo("conv2d", o, dir);
  EXPECT_EQ(conv.outputs[0].shape, (Shape{2, 8, 4, 4}));
  EXPECT_EQ(conv.parameters, 8 * 3 * 9);
  EXPECT_EQ(conv.flops, 2.0 * (2 * 8 * 4 * 4) * 3 * 9);

  o.in_channels = 4;  // channel multiplier 2
  ModelSummary dw = inspect_zoo("depthwise", o, dir);
  EXPECT_EQ(dw.outputs[0].shape, (Shape{2, 8, 4, 4}));
  EXPECT_EQ(dw.parameters, 8 * 9);

  o.out_channels = 6;  // not a multiple of 4
  EXPECT_THROW(build_zoo_model("depthwise", o), Error);
  o.out_channels = 8;
  o.kernel = 11;  // larger than the 10x10 input
  EXPECT_THROW(build_zoo_model("conv2d", o), Error);
}

// A 3 x 5 by 5 x 4 product, `batch` times.
ZooOptions small_matmul(int64_t batch = 1) {
  ZooOptions o;
  o.batch = batch;
  o.m = 3;
  o.n = 4;
  o.k = 5;
  return o;
}

TEST(SingleOpZoo, BatchMatmulMultipliesTwoInputsPerBatch) {
  const ZooOptions o = small_matmul(2);
  testing::TempDir dir;
  build_zoo_model("batch_matmul", o).save(dir.path("bmm.onnx"));
  Graph g = load_model(dir.path("bmm.onnx"), {});
  EXPECT_EQ(g.value("B").constant, nullptr) << "the right-hand operand is an input";
  Tensor a = seeded_input(g.value("A"), 7, 0), b = seeded_input(g.value("B"), 7, 1);
  Tensor y = run_reference(g, {{"A", a}, {"B", b}})[0];
  ASSERT_EQ(y.shape(), (Shape{2, 3, 4}));
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < 4; ++j) {
        double expect = 0;
        for (int64_t p = 0; p < 5; ++p) expect += a.get_double((n * 3 + i) * 5 + p) * b.get_double((n * 5 + p) * 4 + j);
        EXPECT_NEAR(y.get_double((n * 3 + i) * 4 + j), expect, 1e-5);
      }
}

// A is the input [M, K] and B the weight [K, N]: check the product against the initializer itself.
TEST(SingleOpZoo, MatmulComputesInputTimesWeight) {
  const ZooOptions o = small_matmul();
  testing::TempDir dir;
  build_zoo_model("matmul", o).save(dir.path("mm.onnx"));
  Graph g = load_model(dir.path("mm.onnx"), {});
  Tensor a = seeded_input(g.value("A"), 7, 0);
  const Tensor& b = *g.value("B").constant;
  ASSERT_EQ(b.shape(), (Shape{5, 4}));
  Tensor y = run_reference(g, {{"A", a}})[0];
  ASSERT_EQ(y.shape(), (Shape{3, 4}));
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) {
      double expect = 0;
      for (int64_t p = 0; p < 5; ++p) expect += a.get_double(i * 5 + p) * b.get_double(p * 4 + j);
      EXPECT_NEAR(y.get_double(i * 4 + j), expect, 1e-5);
    }
}

TEST(SingleOpZoo, CommandLineFlags) {
  testing::TempDir dir;
  const std::string model = dir.path("c.onnx");
  std::string cmd = std::string(KILN_BINARY) + " zoo conv2d --batch 1 --in-channels 16 --out-channels 32 --size 28" +
                    " --kernel 5 --stride 1 --padding 2 -o " + model + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  ModelSummary s = summarize_model(model, {});
  EXPECT_EQ(s.outputs[0].shape, (Shape{1, 32, 28, 28}));
  EXPECT_EQ(s.parameters, 32 * 16 * 25);
  cmd = std::string(KILN_BINARY) + " zoo matmul --m 8 --n 16 --k 32 -o " + model + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(summarize_model(model, {}).flops, 2.0 * 8 * 16 * 32);
}

}  // namespace
}  // namespace kiln
