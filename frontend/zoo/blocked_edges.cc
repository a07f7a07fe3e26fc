// blocked_edges: a small CNN made of the ops the layout stage keeps blocked between convolutions
// besides activations (frontend/layout/block_layout.h): a padded MaxPool, hard-swish (Div by a
// constant), a padded ceil-mode AveragePool counting its padding, a squeeze-and-excitation scale
// computed at run time through Gemms, Dropout and a ceil-mode MaxPool. Channel counts (20, 24) leave
// a partly padded block at every vector width. Its compiled code is checked against ONNX Runtime
// (tests/conformance, ort.zoo.compiled.blocked_edges).
#include "frontend/zoo/cnn_layers.h"
#include "frontend/zoo/zoo_models.h"

namespace kiln {
namespace {

// Output extent of a pool over `in` positions (ONNX's rule: with ceil_mode, a last window that starts
// past the input and its leading padding is dropped).
int64_t pooled(int64_t in, int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode) {
  const int64_t span = in + 2 * pad - kernel;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

}  // namespace

ModelBuilder build_blocked_edges(const ZooOptions& o) {
  WeightInit w(o.seed);
  ModelBuilder b("blocked_edges", 17);
  CnnBuilder c(b, w);
  const int64_t size = o.size > 0 ? o.size : 32;
  FeatureMap x = c.input("input", o.batch, 3, {size, size});
  FeatureMap c1 = c.relu(c.conv(x, "conv1", {20, {3, 3}, {1, 1}, {1, 1}, 1, true}), "relu1");
  FeatureMap p1 = c.max_pool(c1, "pool1", 3, 2, 1);

  // hard-swish: y * clip(y + 3, 0, 6) / 6
  FeatureMap c2 = c.conv(p1, "conv2", {24, {3, 3}, {1, 1}, {1, 1}, 1, true});
  b.initializer("three", Tensor::scalar_double(DType::Float32, 3.0));
  b.initializer("six", Tensor::scalar_double(DType::Float32, 6.0));
  b.initializer("zero", Tensor::scalar_double(DType::Float32, 0.0));
  b.node("Add", {c2.name, "three"}, {"hs.shift"}, "hs.shift");
  b.node("Clip", {"hs.shift", "zero", "six"}, {"hs.clip"}, "hs.clip");
  b.node("Div", {"hs.clip", "six"}, {"hs.gate"}, "hs.gate");
  b.node("Mul", {c2.name, "hs.gate"}, {"hswish"}, "hswish");

  const int64_t s2 = pooled(p1.spatial[0], 3, 2, 1, true);
  b.node("AveragePool", {"hswish"}, {"pool2"}, "pool2")
      .attr("kernel_shape", std::vector<int64_t>{3, 3})
      .attr("strides", std::vector<int64_t>{2, 2})
      .attr("pads", std::vector<int64_t>{1, 1, 1, 1})
      .attr("ceil_mode", int64_t{1})
      .attr("count_include_pad", int64_t{1});

  // squeeze and excitation: the per-channel scale is an activation, not a constant
  b.node("GlobalAveragePool", {"pool2"}, {"se.mean"}, "se.mean");
  b.node("Flatten", {"se.mean"}, {"se.flat"}, "se.flat");
  b.initializer("se.fc1.weight", xavier_uniform(w, {8, 24}, 24, 8));
  b.initializer("se.fc1.bias", w.uniform_tensor({8}, -0.1, 0.1));
  b.node("Gemm", {"se.flat", "se.fc1.weight", "se.fc1.bias"}, {"se.fc1"}, "se.fc1").attr("transB", int64_t{1});
  b.node("Relu", {"se.fc1"}, {"se.relu"}, "se.relu");
  b.initializer("se.fc2.weight", xavier_uniform(w, {24, 8}, 8, 24));
  b.initializer("se.fc2.bias", w.uniform_tensor({24}, -0.1, 0.1));
  b.node("Gemm", {"se.relu", "se.fc2.weight", "se.fc2.bias"}, {"se.fc2"}, "se.fc2").attr("transB", int64_t{1});
  b.node("Sigmoid", {"se.fc2"}, {"se.gate"}, "se.gate");
  b.initializer("se.shape", Tensor::from_ints(DType::Int64, {4}, std::vector<int64_t>{-1, 24, 1, 1}));
  b.node("Reshape", {"se.gate", "se.shape"}, {"se.scale"}, "se.scale");
  b.node("Mul", {"pool2", "se.scale"}, {"se"}, "se");
  b.node("Dropout", {"se"}, {"dropout"}, "dropout");

  const int64_t s3 = pooled(s2, 2, 2, 0, true);
  b.node("MaxPool", {"dropout"}, {"pool3"}, "pool3")
      .attr("kernel_shape", std::vector<int64_t>{2, 2})
      .attr("strides", std::vector<int64_t>{2, 2})
      .attr("ceil_mode", int64_t{1});
  FeatureMap c3 = c.conv({"pool3", 24, {s3, s3}}, "conv3", {16, {1, 1}, {}, {}, 1, true});
  b.output(c3.name, DType::Float32, Shape{o.batch, 16, s3, s3});
  return b;
}

}  // namespace kiln
