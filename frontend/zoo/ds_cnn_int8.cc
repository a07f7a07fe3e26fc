// ds_cnn_int8: a keyword spotter in the shape of Hello Edge's DS-CNN (Zhang et al. 2017; the model of
// MLPerf Tiny's keyword-spotting benchmark), quantized to int8 the way ONNX Runtime's quantizer writes
// operator-format (QOperator) models: 49 frames of 10 MFCC features, a 10x4 convolution of stride 2 to 64
// channels, four depthwise-separable blocks (3x3 depthwise, 1x1 pointwise, 64 channels), an average pool
// and a 12-word classifier. About 23 thousand weights (DS-CNN small) and 2.7 million multiply-adds.
//
// int8 everywhere, int32 accumulators: QuantizeLinear, QLinearConv with per-channel weight scales and
// int32 biases, QLinearMatMul, DequantizeLinear. Each ReLU is fused the way quantizers fuse it: its
// output's zero point is -128, so saturation clips the negatives. The pool runs in float between a
// DequantizeLinear and a QuantizeLinear (GlobalAveragePool has no standard quantized form). The weights
// are seeded int8; the scales are chosen so activations keep their spread (no layer saturates whole).
//
// ds_cnn_qdq is the same model, numbers and all, in the form ONNX Runtime's quantizer writes by default
// (QDQ): each QLinearConv is DequantizeLinear (activation, weight, bias) -> Conv -> QuantizeLinear, the
// classifier DequantizeLinear -> MatMul -> QuantizeLinear.
#include <cmath>
#include <set>
#include <string>

#include "frontend/zoo/weights.h"
#include "frontend/zoo/zoo_models.h"

namespace kiln {
namespace {

constexpr int64_t kFrames = 49, kFeatures = 10, kChannels = 64, kWords = 12, kBlocks = 4;
// Activations: the input in [-2, 2) per 1/64; every ReLU output in [0, 5.1] per 0.02.
constexpr double kInputScale = 1.0 / 64, kActivationScale = 0.02;

Tensor scalar(DType t, double v) { return Tensor::from_doubles(t, {}, std::vector<double>{v}); }

class QuantizedLayers {
 public:
  QuantizedLayers(ModelBuilder& b, WeightInit& w, bool qdq) : b_(b), w_(w), qdq_(qdq) {}

  // A QLinearConv whose int8 weights are uniform in [-127, 127] and whose per-channel scales give the
  // float weights He's spread for `fan_in` inputs; int32 biases of up to a tenth of an output step.
  std::string conv(const std::string& x, double x_scale, const std::string& name, Shape weight, int64_t fan_in,
                   int64_t group, std::vector<int64_t> strides, std::vector<int64_t> pads) {
    const int64_t out = weight[0];
    std::vector<double> q(static_cast<size_t>(num_elements(weight))), scales(static_cast<size_t>(out));
    for (double& v : q) v = std::round(w_.uniform(-127.0, 127.0));
    // He-uniform's bound is sqrt(6 / fan_in); int8's is 127. Channels differ by up to 1.8x, as trained
    // ones do, by a factor whose mean square is about 1, so nine layers keep the activations' spread.
    for (double& s : scales) s = std::sqrt(6.0 / static_cast<double>(fan_in)) / 127.0 * w_.uniform(0.7, 1.27);
    std::vector<double> bias(static_cast<size_t>(out));
    for (size_t c = 0; c < bias.size(); ++c)
      bias[c] = std::round(w_.uniform(-0.1, 0.1) * kActivationScale / (x_scale * scales[c]));
    b_.initializer(name + ".w", Tensor::from_doubles(DType::Int8, weight, q));
    b_.initializer(name + ".w_scale", Tensor::from_doubles(DType::Float32, {out}, scales));
    b_.initializer(name + ".w_zero_point", Tensor::from_doubles(DType::Int8, {out}, std::vector<double>(scales.size(), 0)));
    b_.initializer(name + ".bias", Tensor::from_doubles(DType::Int32, {out}, bias));
    const std::string x_zero = zero_point(x_scale == kInputScale ? 0 : -128);
    if (!qdq_) {
      b_.node("QLinearConv",
              {x, scale_of(x_scale), x_zero, name + ".w", name + ".w_scale", name + ".w_zero_point",
               scale_of(kActivationScale), zero_point(-128), name + ".bias"},
              {name}, name)
          .attr("group", group)
          .attr("strides", strides)
          .attr("pads", pads);
      return name;
    }
    // The bias is dequantized with x_scale * w_scale per channel (float32, as quantizers write it).
    std::vector<double> bias_scales(scales.size());
    for (size_t c = 0; c < scales.size(); ++c)
      bias_scales[c] = static_cast<double>(static_cast<float>(x_scale) * static_cast<float>(scales[c]));
    b_.initializer(name + ".bias_scale", Tensor::from_doubles(DType::Float32, {out}, bias_scales));
    b_.initializer(name + ".bias_zero_point", Tensor::from_doubles(DType::Int32, {out}, std::vector<double>(scales.size(), 0)));
    b_.node("DequantizeLinear", {x, scale_of(x_scale), x_zero}, {name + ".x"});
    b_.node("DequantizeLinear", {name + ".w", name + ".w_scale", name + ".w_zero_point"}, {name + ".wf"}).attr("axis", int64_t{0});
    b_.node("DequantizeLinear", {name + ".bias", name + ".bias_scale", name + ".bias_zero_point"}, {name + ".bf"})
        .attr("axis", int64_t{0});
    b_.node("Conv", {name + ".x", name + ".wf", name + ".bf"}, {name + ".y"}, name + ".conv")
        .attr("group", group)
        .attr("strides", strides)
        .attr("pads", pads);
    b_.node("QuantizeLinear", {name + ".y", scale_of(kActivationScale), zero_point(-128)}, {name});
    return name;
  }

  // The classifier: QLinearMatMul, or DequantizeLinear -> MatMul -> QuantizeLinear.
  void matmul(const std::string& a, double a_scale, const std::string& b, double b_scale, const std::string& y,
              double y_scale) {
    if (!qdq_) {
      b_.node("QLinearMatMul",
              {a, scale_of(a_scale), zero_point(-128), b, scale_of(b_scale), zero_point(0), scale_of(y_scale), zero_point(0)},
              {y}, "fc");
      return;
    }
    b_.node("DequantizeLinear", {a, scale_of(a_scale), zero_point(-128)}, {a + ".f"});
    b_.node("DequantizeLinear", {b, scale_of(b_scale), zero_point(0)}, {b + ".f"});
    b_.node("MatMul", {a + ".f", b + ".f"}, {y + ".f"}, "fc");
    b_.node("QuantizeLinear", {y + ".f", scale_of(y_scale), zero_point(0)}, {y});
  }

  // A shared scale or zero point initializer (one per value).
  std::string scale_of(double s) {
    const std::string name = "scale_" + std::to_string(s == kInputScale ? 0 : s == kActivationScale ? 1 : ++count_);
    if (!defined_.count(name)) b_.initializer(name, scalar(DType::Float32, s));
    defined_.insert(name);
    return name;
  }
  std::string zero_point(int64_t z) {
    const std::string name = "zero_point_" + std::string(z < 0 ? "m" : "") + std::to_string(std::abs(z));
    if (!defined_.count(name)) b_.initializer(name, scalar(DType::Int8, static_cast<double>(z)));
    defined_.insert(name);
    return name;
  }

 private:
  ModelBuilder& b_;
  WeightInit& w_;
  bool qdq_;
  std::set<std::string> defined_;
  int count_ = 1;
};

ModelBuilder build_ds_cnn(const ZooOptions& o, bool qdq) {
  WeightInit w(o.seed);
  ModelBuilder b(qdq ? "ds_cnn_qdq" : "ds_cnn_int8", 13);
  QuantizedLayers q(b, w, qdq);
  b.input("mfcc", DType::Float32, Shape{o.batch, 1, kFrames, kFeatures});
  b.node("QuantizeLinear", {"mfcc", q.scale_of(kInputScale), q.zero_point(0)}, {"mfcc.q"});
  // 49x10 -> 25x5: "same" padding for a 10x4 kernel of stride 2.
  std::string x = q.conv("mfcc.q", kInputScale, "conv1", {kChannels, 1, 10, 4}, 40, 1, {2, 2}, {4, 1, 5, 2});
  for (int64_t i = 1; i <= kBlocks; ++i) {
    const std::string p = "block" + std::to_string(i);
    x = q.conv(x, kActivationScale, p + ".dw", {kChannels, 1, 3, 3}, 9, kChannels, {1, 1}, {1, 1, 1, 1});
    x = q.conv(x, kActivationScale, p + ".pw", {kChannels, kChannels, 1, 1}, kChannels, 1, {1, 1}, {0, 0, 0, 0});
  }
  b.node("DequantizeLinear", {x, q.scale_of(kActivationScale), q.zero_point(-128)}, {"features.f"});
  b.node("GlobalAveragePool", {"features.f"}, {"pooled.f"});
  b.initializer("pooled.shape", Tensor::from_ints(DType::Int64, {2}, std::vector<int64_t>{o.batch, kChannels}));
  b.node("Reshape", {"pooled.f", "pooled.shape"}, {"pooled.flat"});
  b.node("QuantizeLinear", {"pooled.flat", q.scale_of(kActivationScale), q.zero_point(-128)}, {"pooled.q"});
  // The classifier: int8 weights [64, 12] with one scale, its logits in int8 per 1/16, then float.
  constexpr double kFcScale = 0.0025, kLogitScale = 1.0 / 16;
  std::vector<double> fc(static_cast<size_t>(kChannels * kWords));
  for (double& v : fc) v = std::round(w.uniform(-127.0, 127.0));
  b.initializer("fc.w", Tensor::from_doubles(DType::Int8, {kChannels, kWords}, fc));
  q.matmul("pooled.q", kActivationScale, "fc.w", kFcScale, "logits.q", kLogitScale);
  b.node("DequantizeLinear", {"logits.q", q.scale_of(kLogitScale), q.zero_point(0)}, {"logits"});
  b.output("logits", DType::Float32, Shape{o.batch, kWords});
  return b;
}

}  // namespace

ModelBuilder build_ds_cnn_int8(const ZooOptions& o) { return build_ds_cnn(o, false); }
ModelBuilder build_ds_cnn_qdq(const ZooOptions& o) { return build_ds_cnn(o, true); }

}  // namespace kiln
