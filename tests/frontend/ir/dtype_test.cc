#include "frontend/ir/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kiln {
namespace {

TEST(Float16, KnownBitPatterns) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);              // largest finite half
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);              // rounds up to infinity
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -26)), 0x0000);  // below half the smallest subnormal
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
}

TEST(Float16, RoundsHalfToEven) {
  // 1 + 2^-11 lies halfway between 1 and the next half (1 + 2^-10): ties go to the even mantissa (1).
  EXPECT_EQ(float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3*2^-11 lies halfway between 1+2^-10 (odd) and 1+2^-9 (even).
  EXPECT_EQ(float_to_half(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
}

TEST(Float16, RoundTripsEveryHalf) {
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    float f = half_to_float(static_cast<uint16_t>(bits));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), bits) << "bits " << bits;
  }
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3f80);
  EXPECT_EQ(bfloat16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(float_to_bfloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie -> even
}

TEST(DType, WrapAndRound) {
  EXPECT_EQ(wrap_to_dtype(300, DType::UInt8), 44);
  EXPECT_EQ(wrap_to_dtype(200, DType::Int8), -56);
  EXPECT_EQ(wrap_to_dtype(5, DType::Bool), 1);
  EXPECT_EQ(round_to_dtype(0.1, DType::Float32), static_cast<double>(0.1f));
  EXPECT_EQ(round_to_dtype(0.1, DType::Float64), 0.1);
  EXPECT_EQ(dtype_name(DType::BFloat16), "bfloat16");
  EXPECT_EQ(dtype_name(static_cast<DType>(22)), "int4");
  EXPECT_EQ(dtype_name(static_cast<DType>(99)), "dtype(99)");
  EXPECT_FALSE(is_supported(DType::String));
}

}  // namespace
}  // namespace kiln
