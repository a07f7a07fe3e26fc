#include "frontend/zoo/cnn_layers.h"

#include <cmath>

#include "frontend/ir/error.h"

namespace kiln {

Tensor xavier_uniform(WeightInit& w, Shape shape, int64_t fan_in, int64_t fan_out) {
  double limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return w.uniform_tensor(std::move(shape), -limit, limit);
}

std::vector<int64_t> repeat(int64_t v, size_t n) { return std::vector<int64_t>(n, v); }

FeatureMap CnnBuilder::input(const std::string& name, int64_t batch, int64_t channels,
                             const std::vector<int64_t>& spatial) {
  if (batch < 1 || channels < 1) throw Error("zoo: batch and channels must be positive");
  for (int64_t s : spatial)
    if (s < 1) throw Error("zoo: input size must be positive");
  batch_ = batch;
  Shape shape{batch, channels};
  shape.insert(shape.end(), spatial.begin(), spatial.end());
  b_.input(name, DType::Float32, shape);
  return {name, channels, spatial};
}

FeatureMap CnnBuilder::conv(const FeatureMap& x, const std::string& name, const ConvSpec& spec) {
  const size_t rank = x.spatial.size();
  std::vector<int64_t> strides = spec.strides.empty() ? repeat(1, rank) : spec.strides;
  std::vector<int64_t> pads = spec.pads.empty() ? repeat(0, rank) : spec.pads;
  if (spec.kernel.size() != rank || strides.size() != rank || pads.size() != rank)
    throw Error("zoo: conv " + name + ": kernel/strides/pads rank does not match the input");
  if (spec.group < 1 || x.channels % spec.group != 0 || spec.out_channels < 1 || spec.out_channels % spec.group != 0)
    throw Error("zoo: conv " + name + ": channels must be positive multiples of group");
  FeatureMap y{name, spec.out_channels, {}};
  int64_t taps = 1;
  for (size_t i = 0; i < rank; ++i) {
    if (spec.kernel[i] < 1 || strides[i] < 1 || pads[i] < 0)
      throw Error("zoo: conv " + name + ": kernel and stride must be positive, padding non-negative");
    if (x.spatial[i] + 2 * pads[i] < spec.kernel[i])
      throw Error("zoo: conv " + name + ": the input is smaller than the kernel");
    y.spatial.push_back((x.spatial[i] + 2 * pads[i] - spec.kernel[i]) / strides[i] + 1);
    taps *= spec.kernel[i];
  }
  const int64_t in_per_group = x.channels / spec.group;
  Shape w_shape{spec.out_channels, in_per_group};
  w_shape.insert(w_shape.end(), spec.kernel.begin(), spec.kernel.end());
  b_.initializer(name + ".weight", w_.he_uniform(w_shape, in_per_group * taps));
  std::vector<std::string> inputs{x.name, name + ".weight"};
  if (spec.bias) {
    b_.initializer(name + ".bias", w_.uniform_tensor({spec.out_channels}, -0.1, 0.1));
    inputs.push_back(name + ".bias");
  }
  std::vector<int64_t> onnx_pads = pads;  // ONNX: all begins, then all ends
  onnx_pads.insert(onnx_pads.end(), pads.begin(), pads.end());
  auto node = b_.node("Conv", inputs, {name}, name);
  node.attr("kernel_shape", spec.kernel).attr("strides", strides).attr("pads", onnx_pads);
  if (spec.group != 1) node.attr("group", spec.group);
  return y;
}

FeatureMap CnnBuilder::batch_norm(const FeatureMap& x, const std::string& name, BnScale scale) {
  const int64_t c = x.channels;
  // Running statistics near the identity (mean ~ 0, variance ~ 1) keep a He-initialised conv's
  // output at its own scale; the spread makes every channel's affine map distinct.
  if (scale == BnScale::ResidualBranchEnd) b_.initializer(name + ".weight", w_.uniform_tensor({c}, 0.1, 0.3));
  else b_.initializer(name + ".weight", w_.uniform_tensor({c}, 0.8, 1.2));
  b_.initializer(name + ".bias", w_.uniform_tensor({c}, -0.1, 0.1));
  b_.initializer(name + ".running_mean", w_.uniform_tensor({c}, -0.1, 0.1));
  b_.initializer(name + ".running_var", w_.uniform_tensor({c}, 0.8, 1.2));
  b_.node("BatchNormalization",
          {x.name, name + ".weight", name + ".bias", name + ".running_mean", name + ".running_var"}, {name}, name)
      .attr("epsilon", 1e-5);
  return {name, c, x.spatial};
}

FeatureMap CnnBuilder::relu(const FeatureMap& x, const std::string& name) {
  b_.node("Relu", {x.name}, {name}, name);
  return {name, x.channels, x.spatial};
}

FeatureMap CnnBuilder::relu6(const FeatureMap& x, const std::string& name) {
  if (!relu6_bounds_added_) {
    b_.initializer("relu6.min", Tensor::scalar_double(DType::Float32, 0.0));
    b_.initializer("relu6.max", Tensor::scalar_double(DType::Float32, 6.0));
    relu6_bounds_added_ = true;
  }
  b_.node("Clip", {x.name, "relu6.min", "relu6.max"}, {name}, name);
  return {name, x.channels, x.spatial};
}

FeatureMap CnnBuilder::add(const FeatureMap& a, const FeatureMap& b, const std::string& name) {
  if (a.channels != b.channels || a.spatial != b.spatial) throw Error("zoo: add " + name + ": shapes differ");
  b_.node("Add", {a.name, b.name}, {name}, name);
  return {name, a.channels, a.spatial};
}

namespace {

std::vector<int64_t> pooled(const FeatureMap& x, const std::string& what, int64_t kernel, int64_t stride, int64_t pad) {
  std::vector<int64_t> out;
  for (int64_t s : x.spatial) {
    if (s + 2 * pad < kernel) throw Error("zoo: " + what + ": the input is smaller than the kernel");
    out.push_back((s + 2 * pad - kernel) / stride + 1);
  }
  return out;
}

}  // namespace

FeatureMap CnnBuilder::pool(const std::string& op, const FeatureMap& x, const std::string& name, int64_t kernel,
                            int64_t stride, int64_t pad, bool count_padding) {
  const size_t rank = x.spatial.size();
  FeatureMap y{name, x.channels, pooled(x, op + " " + name, kernel, stride, pad)};
  auto node = b_.node(op, {x.name}, {name}, name);
  node.attr("kernel_shape", repeat(kernel, rank)).attr("strides", repeat(stride, rank)).attr("pads", repeat(pad, 2 * rank));
  if (op == "AveragePool") node.attr("count_include_pad", int64_t{count_padding ? 1 : 0});
  return y;
}

FeatureMap CnnBuilder::zero_pad(const FeatureMap& x, const std::string& name, int64_t left, int64_t right, int64_t top,
                                int64_t bottom) {
  if (x.spatial.size() != 2) throw Error("zoo: zero_pad " + name + ": a 2-D map only");
  const std::vector<int64_t> pads{0, 0, top, left, 0, 0, bottom, right};
  b_.initializer(name + ".pads", Tensor::from_ints(DType::Int64, {8}, pads));
  b_.node("Pad", {x.name, name + ".pads"}, {name}, name);
  return {name, x.channels, {x.spatial[0] + top + bottom, x.spatial[1] + left + right}};
}

FeatureMap CnnBuilder::crop_top_left(const FeatureMap& x, const std::string& name) {
  if (x.spatial.size() != 2) throw Error("zoo: crop_top_left " + name + ": a 2-D map only");
  b_.initializer(name + ".starts", Tensor::from_ints(DType::Int64, {2}, std::vector<int64_t>{1, 1}));
  b_.initializer(name + ".ends", Tensor::from_ints(DType::Int64, {2}, x.spatial));
  b_.initializer(name + ".axes", Tensor::from_ints(DType::Int64, {2}, std::vector<int64_t>{2, 3}));
  b_.node("Slice", {x.name, name + ".starts", name + ".ends", name + ".axes"}, {name}, name);
  return {name, x.channels, {x.spatial[0] - 1, x.spatial[1] - 1}};
}

FeatureMap CnnBuilder::max_pool(const FeatureMap& x, const std::string& name, int64_t kernel, int64_t stride,
                                int64_t pad) {
  return pool("MaxPool", x, name, kernel, stride, pad);
}

FeatureMap CnnBuilder::avg_pool(const FeatureMap& x, const std::string& name, int64_t kernel, int64_t stride,
                                int64_t pad, bool count_padding) {
  return pool("AveragePool", x, name, kernel, stride, pad, count_padding);
}

FeatureMap CnnBuilder::concat(const std::vector<FeatureMap>& parts, const std::string& name) {
  std::vector<std::string> names;
  int64_t channels = 0;
  for (const FeatureMap& p : parts) {
    if (p.spatial != parts.front().spatial) throw Error("zoo: concat " + name + ": spatial sizes differ");
    names.push_back(p.name);
    channels += p.channels;
  }
  b_.node("Concat", names, {name}, name).attr("axis", int64_t{1});
  return {name, channels, parts.front().spatial};
}

void CnnBuilder::classifier(const FeatureMap& x, const std::string& fc_name, int64_t classes) {
  b_.node("GlobalAveragePool", {x.name}, {"avgpool"}, "avgpool");
  b_.node("Flatten", {"avgpool"}, {"flatten"}, "flatten");
  b_.initializer(fc_name + ".weight", xavier_uniform(w_, {classes, x.channels}, x.channels, classes));
  b_.initializer(fc_name + ".bias", w_.uniform_tensor({classes}, -0.1, 0.1));
  b_.node("Gemm", {"flatten", fc_name + ".weight", fc_name + ".bias"}, {"logits"}, fc_name).attr("transB", int64_t{1});
  b_.output("logits", DType::Float32, Shape{batch_, classes});
}

}  // namespace kiln
