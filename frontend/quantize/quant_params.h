/// \file How real values become 8-bit integers in the models `kiln quantize` writes. The conventions are
/// ONNX Runtime's quantizer's (quantize_static), so a model kiln quantizes is one ONNX Runtime users
/// recognise and ONNX Runtime runs with its own integer kernels:
///   activations  asymmetric over [min(lo, 0), max(hi, 0)], so that zero is exact (a ReLU's output has
///                the lowest code as its zero point: saturation is the ReLU);
///   weights      symmetric, int8 in [-127, 127], per tensor or per output channel;
///   biases       int32 at the scale x_scale * w_scale (float32), zero point 0, as QLinearConv wants.
/// `reduce_range` takes a bit off both (weights [-64, 64], activations 7 bits) for x86 cores without
/// VNNI, whose u8 x s8 instruction (vpmaddubsw) saturates pairs of products at 16 bits.
#pragma once
#include <cstdint>

#include "frontend/ir/tensor.h"

namespace kiln {

struct QuantParams {
  float scale = 1.0f;
  int32_t zero_point = 0;
  DType dtype = DType::UInt8;
};

/// An activation's scale and zero point for real values in [lo, hi] (`dtype` UInt8 or Int8).
QuantParams activation_params(double lo, double hi, DType dtype, bool reduce_range);

struct QuantizedWeight {
  Tensor values;       // int8, the weight's shape
  Tensor scales;       // float32: a scalar per tensor, [channels] per channel
  Tensor zero_points;  // int8 zeros, the scales' shape
};

/// Quantizes a float weight symmetrically, per tensor (`axis` < 0) or per slice along `axis`.
QuantizedWeight quantize_weight(const Tensor& w, int64_t axis, bool reduce_range);

struct QuantizedBias {
  Tensor values;  // int32 [channels]
  Tensor scales;  // float32 [channels]: x_scale * w_scale, rounded to float32
};

/// A bias of `channels` values (one value broadcast when the tensor has one) at x_scale * w_scale.
QuantizedBias quantize_bias(const Tensor& bias, float x_scale, const Tensor& w_scales, int64_t channels);

}  // namespace kiln
