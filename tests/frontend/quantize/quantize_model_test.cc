// `kiln quantize` end to end (frontend/quantize/quantize_model.h) on a small opset-9 model in the
// shape of mnist-8's export: a Conv whose bias is a separate Add, a ReLU, and a dense layer written
// as MatMul + Add. The quantized model must be what kiln's (and ONNX Runtime's) QDQ fusion turns
// wholly into integer kernels, and close to the float model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "frontend/ir/error.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/passes/fuse_qdq.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/passes/remove_dead_nodes.h"
#include "frontend/quantize/quantize_model.h"
#include "frontend/reference/interpreter.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

ModelBuilder dense_after_conv() {
  ModelBuilder b("conv_dense", 9, 4);
  b.input("x", DType::Float32, Shape{1, 3, 8, 8});
  b.initializer("w", testing::random_weights({4, 3, 3, 3}, 1));
  b.initializer("b", testing::random_weights({4, 1, 1}, 2));
  b.initializer("fc", testing::random_weights({256, 5}, 3));
  b.initializer("fc_b", testing::random_weights({5}, 4));
  b.node("Conv", {"x", "w"}, {"conv"}, "conv").attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  b.node("Add", {"conv", "b"}, {"biased"}, "bias");
  b.node("Relu", {"biased"}, {"relu"});
  b.node("Flatten", {"relu"}, {"flat"});
  b.node("MatMul", {"flat", "fc"}, {"logits"}, "fc");
  b.node("Add", {"logits", "fc_b"}, {"y"}, "fc_bias");
  b.output("y", DType::Float32, Shape{1, 5});
  return b;
}

std::vector<std::map<std::string, Tensor>> samples(int n) {
  std::vector<std::map<std::string, Tensor>> s;
  for (int k = 0; k < n; ++k) s.push_back({{"x", testing::random_weights({1, 3, 8, 8}, 100 + static_cast<uint32_t>(k))}});
  return s;
}

Graph inferred(const std::string& bytes) {
  Graph g = import_onnx_bytes(bytes, "quantized");
  bind_input_shapes(g, {});
  infer_shapes(g);
  return g;
}

TEST(QuantizeModel, AnOpset9ConvAndDenseLayerBecomeIntegerKernelsCloseToTheFloatModel) {
  testing::TempDir dir;
  ModelBuilder b = dense_after_conv();
  b.save(dir.path("m.onnx"));
  QuantizeOptions o;
  o.per_channel = true;
  const QuantizeResult r = quantize_model(dir.path("m.onnx"), o, samples(4));
  auto logged = [&](const std::string& what) {
    return std::any_of(r.log.begin(), r.log.end(), [&](const std::string& l) { return l.find(what) != std::string::npos; });
  };
  EXPECT_TRUE(logged("opset: 9 -> 13"));
  EXPECT_TRUE(logged("conv_add_to_bias: Add 'bias' is the bias of Conv 'conv'"));
  EXPECT_TRUE(logged("matmul_add_to_gemm: MatMul 'fc' and Add 'fc_bias' are one Gemm"));

  Graph q = inferred(r.model);
  const Graph unfused = q;
  EXPECT_EQ(fuse_qdq(q), 2);
  remove_dead_nodes(q);
  const std::vector<std::string> ops = testing::op_types(q);
  for (const char* gone : {"Conv", "Gemm", "MatMul", "Add", "Relu"})
    EXPECT_EQ(std::count(ops.begin(), ops.end(), gone), 0) << gone;
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "QLinearConv"), 2);  // the Gemm is one of 1x1 images
  for (const Node& n : q.nodes) {
    if (n.op_type == "QLinearConv") {
      EXPECT_EQ(q.constant_input(n, 3)->dtype(), DType::Int8) << n.name;
    }
  }

  // Within a few output steps of the float model, on inputs calibration did not see; and the
  // unfused QDQ graph (float arithmetic between the pairs) within one step of the fused one.
  Graph f = inferred(b.serialize());
  const Tensor* y_scale = nullptr;
  for (const Node& n : q.nodes)
    if (n.op_type == "DequantizeLinear" && n.outputs[0] == "y") y_scale = q.constant_input(n, 1);
  ASSERT_NE(y_scale, nullptr);
  const double step = y_scale->get_double(0);
  for (uint32_t seed : {7u, 8u, 9u}) {
    const std::map<std::string, Tensor> in = {{"x", testing::random_weights({1, 3, 8, 8}, seed)}};
    const Tensor yq = run_reference(q, in)[0], yf = run_reference(f, in)[0], yu = run_reference(unfused, in)[0];
    for (int64_t i = 0; i < yq.size(); ++i) {
      EXPECT_LE(std::fabs(yq.get_double(i) - yf.get_double(i)), 4 * step) << "seed " << seed << " output " << i;
      EXPECT_LE(std::fabs(yq.get_double(i) - yu.get_double(i)), step * 1.0001) << "seed " << seed << " output " << i;
    }
  }
}

TEST(QuantizeModel, ExposedCodesAreGraphOutputsOfTheirOwnDtypeAndShape) {
  testing::TempDir dir;
  dense_after_conv().save(dir.path("m.onnx"));
  QuantizeOptions o;
  o.activations = DType::Int8;
  o.expose_codes = true;
  const QuantizeResult r = quantize_model(dir.path("m.onnx"), o, samples(2));
  const Graph q = inferred(r.model);
  // y, then the codes of x, relu, flat and y.
  ASSERT_EQ(q.outputs.size(), 5u);
  EXPECT_EQ(q.outputs[1], "x.q");
  EXPECT_EQ(q.value("x.q").dtype, DType::Int8);
  EXPECT_EQ(q.value("relu.q").shape, (Shape{1, 4, 8, 8}));
}

TEST(QuantizeModel, AModelWithNothingToQuantizeOrNoSamplesIsAnErrorNamingTheFile) {
  testing::TempDir dir;
  testing::relu_model().save(dir.path("relu.onnx"));
  try {
    quantize_model(dir.path("relu.onnx"), {}, {{{"x", testing::random_weights({1, 4}, 1)}}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("relu.onnx: nothing to quantize"), std::string::npos) << e.what();
  }
  dense_after_conv().save(dir.path("m.onnx"));
  EXPECT_THROW(quantize_model(dir.path("m.onnx"), {}, {}), Error);
  std::ofstream(dir.path("junk.onnx")) << "not a model";
  EXPECT_THROW(quantize_model(dir.path("junk.onnx"), {}, samples(1)), Error);
}

}  // namespace
}  // namespace kiln
