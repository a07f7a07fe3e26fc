/// \file Layer helpers shared by the zoo's convolutional networks (ResNets, MobileNetV2, R3D, the
/// single-op benchmark models): each call adds one layer's nodes and seeded weights to a ModelBuilder,
/// naming tensors the way torchvision's state dicts do ("layer1.0.conv1.weight"), so a model read in
/// `kiln inspect --verbose` maps onto the paper's tables.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/onnx/model_builder.h"
#include "frontend/zoo/weights.h"

namespace kiln {

/// Xavier (Glorot) uniform: for layers not followed by a ReLU (classifier heads, plain matmuls), where
/// He scaling would double the output variance. Kept here rather than in weights.h (shared file).
Tensor xavier_uniform(WeightInit& w, Shape shape, int64_t fan_in, int64_t fan_out);

/// A feature map flowing through the network: its value name and what the next layer needs to size
/// its weights (channels, and spatial extents for the output shapes the builder must declare).
struct FeatureMap {
  std::string name;
  int64_t channels = 0;
  std::vector<int64_t> spatial;  // [H, W] or [T, H, W]
};

struct ConvSpec {
  int64_t out_channels = 0;
  std::vector<int64_t> kernel;   // one extent per spatial axis
  std::vector<int64_t> strides = {};  // empty = all 1
  std::vector<int64_t> pads = {};     // per spatial axis, at both ends; empty = all 0
  int64_t group = 1;
  bool bias = false;
};

/// How a batch norm's scale is drawn. The last norm of a residual branch gets a small scale so each
/// block adds a fraction of its input's variance to the skip path, and 16-50 blocks deep the
/// activations stay O(1) instead of growing geometrically (the idea behind zero-init residuals,
/// without making the branches dead).
enum class BnScale { Unit, ResidualBranchEnd };

/// `n` copies of `v`: per-axis attributes for a square/cubic kernel.
std::vector<int64_t> repeat(int64_t v, size_t n);

class CnnBuilder {
 public:
  CnnBuilder(ModelBuilder& b, WeightInit& w) : b_(b), w_(w) {}

  /// Declares the graph input [batch, channels, spatial...].
  FeatureMap input(const std::string& name, int64_t batch, int64_t channels, const std::vector<int64_t>& spatial);
  /// Conv with He-uniform weights (fan-in = channels per group x kernel taps), output named `name`.
  FeatureMap conv(const FeatureMap& x, const std::string& name, const ConvSpec& spec);
  /// Inference-mode BatchNormalization with seeded statistics (see BnScale).
  FeatureMap batch_norm(const FeatureMap& x, const std::string& name, BnScale scale = BnScale::Unit);
  FeatureMap relu(const FeatureMap& x, const std::string& name);
  /// ReLU6 as Clip(x, 0, 6), with min/max as inputs (opset 11+); the two bounds are shared by all.
  FeatureMap relu6(const FeatureMap& x, const std::string& name);
  FeatureMap add(const FeatureMap& a, const FeatureMap& b, const std::string& name);
  FeatureMap max_pool(const FeatureMap& x, const std::string& name, int64_t kernel, int64_t stride, int64_t pad);
  /// AveragePool counting the padding (PyTorch's avg_pool2d default, count_include_pad), or not.
  FeatureMap avg_pool(const FeatureMap& x, const std::string& name, int64_t kernel, int64_t stride, int64_t pad,
                      bool count_padding = true);
  /// Zeros added on each side of a 2-D map (PyTorch's ZeroPad2d: left, right, top, bottom).
  FeatureMap zero_pad(const FeatureMap& x, const std::string& name, int64_t left, int64_t right, int64_t top, int64_t bottom);
  /// The map without its first row and column (x[:, :, 1:, 1:]).
  FeatureMap crop_top_left(const FeatureMap& x, const std::string& name);
  /// Concat along channels of maps of one spatial size.
  FeatureMap concat(const std::vector<FeatureMap>& parts, const std::string& name);
  /// GlobalAveragePool -> Flatten -> Gemm (Xavier weights, bias) -> graph output `logits` [batch, classes].
  void classifier(const FeatureMap& x, const std::string& fc_name, int64_t classes);

  int64_t batch() const { return batch_; }

 private:
  // MaxPool or AveragePool (counting the padding) over every spatial axis.
  FeatureMap pool(const std::string& op, const FeatureMap& x, const std::string& name, int64_t kernel, int64_t stride,
                  int64_t pad, bool count_padding = true);

  ModelBuilder& b_;
  WeightInit& w_;
  int64_t batch_ = 1;
  bool relu6_bounds_added_ = false;
};

}  // namespace kiln
