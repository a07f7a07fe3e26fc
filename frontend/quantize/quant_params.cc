#include "frontend/quantize/quant_params.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "frontend/ir/error.h"

namespace kiln {
namespace {

// Rounds half to even, as ONNX Runtime's quantizer (numpy) and QuantizeLinear do.
double round_even(double v) { return std::nearbyint(v); }

int64_t clamp_to(double v, int64_t lo, int64_t hi) {
  if (std::isnan(v)) return 0;
  return static_cast<int64_t>(std::clamp(v, static_cast<double>(lo), static_cast<double>(hi)));
}

}  // namespace

QuantParams activation_params(double lo, double hi, DType dtype, bool reduce_range) {
  if (dtype != DType::UInt8 && dtype != DType::Int8) throw Error("activations quantize to uint8 or int8");
  int64_t qmin = dtype == DType::UInt8 ? 0 : -128, qmax = dtype == DType::UInt8 ? 255 : 127;
  if (reduce_range) {
    qmin = dtype == DType::UInt8 ? 0 : -64;
    qmax = dtype == DType::UInt8 ? 127 : 63;
  }
  // In float32 throughout, as ONNX Runtime's quantizer computes them (numpy float32), so that both
  // write the same parameters for the same range.
  const float rmin = static_cast<float>(std::min(lo, 0.0)), rmax = static_cast<float>(std::max(hi, 0.0));
  QuantParams p;
  p.dtype = dtype;
  p.scale = (rmax - rmin) / static_cast<float>(qmax - qmin);
  if (!(p.scale > 0.0f) || !std::isfinite(p.scale)) {
    // A value that is zero on every calibration sample (or not finite): any scale represents it.
    p.scale = 1.0f;
    p.zero_point = 0;
    return p;
  }
  const float zero = static_cast<float>(qmin) - rmin / p.scale;
  p.zero_point = static_cast<int32_t>(clamp_to(round_even(zero), qmin, qmax));
  return p;
}

QuantizedWeight quantize_weight(const Tensor& w, int64_t axis, bool reduce_range) {
  const int64_t qmax = reduce_range ? 64 : 127;
  const Shape& s = w.shape();
  const int64_t channels = axis < 0 ? 1 : s.at(static_cast<size_t>(axis));
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(std::max<int64_t>(axis + 1, 0)); axis >= 0 && d < s.size(); ++d) inner *= s[d];
  auto channel_of = [&](int64_t i) { return axis < 0 ? 0 : (i / inner) % channels; };
  std::vector<double> absmax(static_cast<size_t>(channels), 0.0);
  for (int64_t i = 0; i < w.size(); ++i) {
    const double v = std::fabs(w.get_double(i));
    double& m = absmax[static_cast<size_t>(channel_of(i))];
    if (std::isfinite(v)) m = std::max(m, v);
  }
  std::vector<double> scales(absmax.size());
  for (size_t c = 0; c < absmax.size(); ++c) {
    const float f = static_cast<float>(absmax[c] / static_cast<double>(qmax));
    scales[c] = f > 0.0f ? f : 1.0f;  // an all-zero channel: any scale
  }
  QuantizedWeight q;
  q.values = Tensor(DType::Int8, s);
  for (int64_t i = 0; i < w.size(); ++i)
    q.values.set_int(i, clamp_to(round_even(w.get_double(i) / scales[static_cast<size_t>(channel_of(i))]), -qmax, qmax));
  const Shape scale_shape = axis < 0 ? Shape{} : Shape{channels};
  q.scales = Tensor::from_doubles(DType::Float32, scale_shape, scales);
  q.zero_points = Tensor(DType::Int8, scale_shape);
  return q;
}

QuantizedBias quantize_bias(const Tensor& bias, float x_scale, const Tensor& w_scales, int64_t channels) {
  if (bias.size() != channels && bias.size() != 1)
    throw Error("a bias of " + std::to_string(bias.size()) + " values for " + std::to_string(channels) + " channels");
  std::vector<double> scales(static_cast<size_t>(channels));
  std::vector<int64_t> values(static_cast<size_t>(channels));
  constexpr double lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
  for (int64_t c = 0; c < channels; ++c) {
    const float ws = static_cast<float>(w_scales.get_double(w_scales.size() == 1 ? 0 : c));
    const float s = x_scale * ws;  // float32, as QLinearConv's requantization multiplies them
    scales[static_cast<size_t>(c)] = s;
    const double b = bias.get_double(bias.size() == 1 ? 0 : c);
    values[static_cast<size_t>(c)] = s > 0.0f ? clamp_to(round_even(b / s), static_cast<int64_t>(lo), static_cast<int64_t>(hi)) : 0;
  }
  return {Tensor::from_ints(DType::Int32, {channels}, values), Tensor::from_doubles(DType::Float32, {channels}, scales)};
}

}  // namespace kiln
