// Scales and codes (frontend/quantize/quant_params.h) follow ONNX Runtime's quantizer: zero is exact,
// weights are symmetric, biases sit at x_scale * w_scale, and halves round to even (float32 throughout).
#include <gtest/gtest.h>

#include "frontend/ir/error.h"
#include "frontend/quantize/quant_params.h"

namespace kiln {
namespace {

TEST(QuantParams, ActivationRangesIncludeZeroAndRoundTheirZeroPointToEven) {
  QuantParams p = activation_params(0.0, 2.55, DType::UInt8, false);
  EXPECT_EQ(p.scale, 2.55f / 255.0f);
  EXPECT_EQ(p.zero_point, 0);
  p = activation_params(0.5, 2.55, DType::UInt8, false);  // the range is widened to 0
  EXPECT_EQ(p.scale, 2.55f / 255.0f);
  EXPECT_EQ(p.zero_point, 0);
  // 1 / float32(2 / 255) is 127.49999 in float32: zero points 127 and -1 (as numpy's float32 gives).
  p = activation_params(-1.0, 1.0, DType::UInt8, false);
  EXPECT_EQ(p.scale, 2.0f / 255.0f);
  EXPECT_EQ(p.zero_point, 127);
  p = activation_params(-1.0, 1.0, DType::Int8, false);
  EXPECT_EQ(p.zero_point, -1);
  p = activation_params(-1.0, 3.0, DType::UInt8, false);  // 63.75 -> 64
  EXPECT_EQ(p.zero_point, 64);
  p = activation_params(-0.5, 0.52, DType::UInt8, false);  // 125 exactly, 0.5 / (1.02 / 255)
  EXPECT_EQ(p.zero_point, 125);
  p = activation_params(-2.0, -1.0, DType::Int8, false);  // all negative: the top code is zero
  EXPECT_EQ(p.zero_point, 127);
  p = activation_params(0.0, 1.27, DType::UInt8, true);  // 7 bits: codes 0..127
  EXPECT_EQ(p.scale, 1.27f / 127.0f);
  p = activation_params(0.0, 0.0, DType::UInt8, false);  // never anything but zero
  EXPECT_EQ(p.scale, 1.0f);
  EXPECT_EQ(p.zero_point, 0);
  EXPECT_THROW(activation_params(0.0, 1.0, DType::Int32, false), Error);
}

TEST(QuantParams, WeightsAreSymmetricPerTensorOrPerChannel) {
  const Tensor w = Tensor::from_doubles(DType::Float32, {2, 2}, std::vector<double>{0.5, -1.0, 0.25, 0.1});
  QuantizedWeight t = quantize_weight(w, -1, false);
  EXPECT_EQ(t.scales.rank(), 0);
  EXPECT_EQ(t.scales.get_double(0), static_cast<float>(1.0 / 127));
  // 63.5 -> 64 (even), -127, 31.75 -> 32, 12.7 -> 13.
  EXPECT_EQ(t.values.to_ints(), (std::vector<int64_t>{64, -127, 32, 13}));
  EXPECT_EQ(t.zero_points.dtype(), DType::Int8);
  QuantizedWeight c = quantize_weight(w, 0, false);
  ASSERT_EQ(c.scales.shape(), Shape{2});
  EXPECT_EQ(c.scales.get_double(1), static_cast<float>(0.25 / 127));
  EXPECT_EQ(c.values.to_ints(), (std::vector<int64_t>{64, -127, 127, 51}));  // 50.8 -> 51
  QuantizedWeight r = quantize_weight(w, 1, true);  // per column, 7 bits: [-64, 64]
  EXPECT_EQ(r.scales.get_double(0), static_cast<float>(0.5 / 64));
  EXPECT_EQ(r.values.to_ints(), (std::vector<int64_t>{64, -64, 32, 6}));  // 6.4 -> 6
}

TEST(QuantParams, BiasesAreInt32AtTheProductOfTheScales) {
  const Tensor bias = Tensor::from_doubles(DType::Float32, {2}, std::vector<double>{1.0, -0.21875});
  const Tensor w_scales = Tensor::from_doubles(DType::Float32, {2}, std::vector<double>{0.25, 0.125});
  QuantizedBias b = quantize_bias(bias, 0.5f, w_scales, 2);
  EXPECT_EQ(b.values.dtype(), DType::Int32);
  EXPECT_EQ(b.values.to_ints(), (std::vector<int64_t>{8, -4}));  // -3.5 -> -4 (even)
  EXPECT_EQ(b.scales.to_doubles(), (std::vector<double>{0.125, 0.0625}));
  EXPECT_THROW(quantize_bias(bias, 0.5f, w_scales, 3), Error);
}

}  // namespace
}  // namespace kiln
