// The narrow types' codecs (frontend/ir/narrow_types.h), checked against definitions written
// independently of them: every code's value from the format's formula, rounding against a brute-force
// search for the nearest value, packing against a hand-packed byte.
#include "frontend/ir/narrow_types.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "frontend/ir/error.h"
#include "frontend/ir/tensor.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

const DType kMinifloats[] = {DType::Float8E4M3FN, DType::Float8E4M3FNUZ, DType::Float8E5M2, DType::Float8E5M2FNUZ,
                             DType::Float4E2M1};

uint32_t code_count(DType t) { return 1u << dtype_bits(t); }

TEST(NarrowTypes, BitsAndStorage) {
  EXPECT_EQ(dtype_bits(DType::Int4), 4);
  EXPECT_EQ(dtype_bits(DType::UInt2), 2);
  EXPECT_EQ(dtype_bits(DType::Float8E5M2), 8);
  EXPECT_EQ(dtype_bits(DType::Float32), 32);
  EXPECT_EQ(storage_bytes(DType::Int4, 5), 3);
  EXPECT_EQ(storage_bytes(DType::Int2, 5), 2);
  EXPECT_EQ(storage_bytes(DType::Float8E4M3FN, 5), 5);
  EXPECT_EQ(dtype_size(DType::Int4), 0u);  // no whole byte per element
  EXPECT_TRUE(is_supported(DType::Float4E2M1));
  EXPECT_FALSE(is_float(DType::Float8E4M3FN));  // never computed in
  EXPECT_EQ(dtype_name(DType::Float8E8M0), "float8e8m0");
}

// Spot values of each format from its definition (bias, NaN and infinity spelling).
TEST(NarrowTypes, DecodesTheFormatsDefiningValues) {
  EXPECT_EQ(narrow_decode(DType::Float8E4M3FN, 0x7e), 448.0);
  EXPECT_EQ(narrow_decode(DType::Float8E4M3FN, 0x01), std::ldexp(1.0, -9));
  EXPECT_TRUE(std::isnan(narrow_decode(DType::Float8E4M3FN, 0xff)));
  EXPECT_EQ(narrow_decode(DType::Float8E4M3FNUZ, 0x7f), 240.0);
  EXPECT_TRUE(std::isnan(narrow_decode(DType::Float8E4M3FNUZ, 0x80)));
  EXPECT_EQ(narrow_decode(DType::Float8E5M2, 0x7b), 57344.0);
  EXPECT_EQ(narrow_decode(DType::Float8E5M2, 0xfc), -INFINITY);
  EXPECT_TRUE(std::isnan(narrow_decode(DType::Float8E5M2, 0x7d)));
  EXPECT_EQ(narrow_decode(DType::Float8E5M2FNUZ, 0x01), std::ldexp(1.0, -17));
  EXPECT_EQ(narrow_decode(DType::Float4E2M1, 0x7), 6.0);
  EXPECT_EQ(narrow_decode(DType::Float4E2M1, 0x9), -0.5);
  EXPECT_EQ(narrow_decode(DType::Float8E8M0, 127), 1.0);
  EXPECT_EQ(narrow_decode(DType::Float8E8M0, 0), std::ldexp(1.0, -127));
  EXPECT_TRUE(std::isnan(narrow_decode(DType::Float8E8M0, 0xff)));
  EXPECT_EQ(narrow_decode(DType::Int4, 0x8), -8.0);
  EXPECT_EQ(narrow_decode(DType::UInt4, 0x8), 8.0);
  EXPECT_EQ(narrow_decode(DType::Int2, 0x3), -1.0);
}

TEST(NarrowTypes, EveryFiniteCodeEncodesBackToItself) {
  for (DType t : kMinifloats)
    for (uint32_t c = 0; c < code_count(t); ++c) {
      const double v = narrow_decode(t, c);
      if (std::isnan(v)) continue;
      for (bool saturate : {true, false}) {
        const uint32_t back = narrow_float_encode(t, v, saturate);
        if (std::isinf(v) && saturate) continue;  // infinity saturates to the largest finite value
        EXPECT_EQ(back, c) << dtype_name(t) << " code " << c << " value " << v;
      }
    }
  // e8m0 by nearest: rounding up would take 2^-127 (a float32 subnormal, mantissa bits set) to 2^-126.
  for (uint32_t c = 0; c < 255; ++c)
    EXPECT_EQ(narrow_float_encode(DType::Float8E8M0, narrow_decode(DType::Float8E8M0, c), true, PowerRounding::Nearest), c);
}

// The nearest finite value of the format by search, ties to the even code; beyond the largest value
// the caller decides.
uint32_t nearest_code(DType t, float x) {
  uint32_t best = 0;
  double best_err = INFINITY;
  for (uint32_t c = 0; c < code_count(t); ++c) {
    const double v = narrow_decode(t, c);
    if (!std::isfinite(v)) continue;
    if ((std::signbit(v) != std::signbit(x)) && v != 0) continue;
    const double err = std::fabs(v - static_cast<double>(x));
    if (err < best_err || (err == best_err && (c & 1) == 0 && v != 0)) best = c, best_err = err;
  }
  return best;
}

TEST(NarrowTypes, RoundsToTheNearestValueTiesToEven) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> exponent(-20, 18), unit(-1, 1);
  for (DType t : kMinifloats) {
    const Minifloat& f = *minifloat_of(t);
    const double largest = narrow_decode(t, f.max_code);
    std::vector<float> xs;
    for (int i = 0; i < 4000; ++i) xs.push_back(static_cast<float>(unit(rng) * std::exp2(exponent(rng))));
    // Every midpoint between neighbouring codes: the ties.
    for (uint32_t c = 0; c < f.max_code; ++c) {
      const double mid = (narrow_decode(t, c) + narrow_decode(t, c + 1)) / 2;
      xs.push_back(static_cast<float>(mid));
      xs.push_back(static_cast<float>(-mid));
    }
    for (float x : xs) {
      if (std::fabs(x) >= largest) continue;
      const uint32_t got = narrow_float_encode(t, x, true);
      const double gv = narrow_decode(t, got), wv = narrow_decode(t, nearest_code(t, x));
      EXPECT_EQ(gv, wv) << dtype_name(t) << " " << x;
      if (gv == 0 && !f.fnuz) {
        EXPECT_EQ(std::signbit(gv), std::signbit(x)) << dtype_name(t) << " " << x;
      }
    }
  }
}

TEST(NarrowTypes, SaturationInfinitiesAndNan) {
  // Past the largest finite value: clamped when saturating; infinity or NaN otherwise.
  EXPECT_EQ(narrow_float_encode(DType::Float8E4M3FN, 1e6, true), 0x7eu);
  EXPECT_EQ(narrow_float_encode(DType::Float8E4M3FN, -1e6, false), 0xffu);
  EXPECT_EQ(narrow_float_encode(DType::Float8E4M3FN, 464, false), 0x7eu);  // the tie rounds down to 448
  EXPECT_EQ(narrow_float_encode(DType::Float8E4M3FN, 465, false), 0x7fu);
  EXPECT_EQ(narrow_float_encode(DType::Float8E5M2, INFINITY, false), 0x7cu);
  EXPECT_EQ(narrow_float_encode(DType::Float8E5M2, -INFINITY, true), 0xfbu);
  EXPECT_EQ(narrow_float_encode(DType::Float8E5M2, 1e9, false), 0x7cu);
  EXPECT_EQ(narrow_float_encode(DType::Float8E4M3FNUZ, INFINITY, true), 0x7fu);
  EXPECT_EQ(narrow_float_encode(DType::Float8E4M3FNUZ, 1e9, false), 0x80u);
  EXPECT_EQ(narrow_float_encode(DType::Float8E5M2FNUZ, -0.0, true), 0x00u);  // no negative zero
  EXPECT_EQ(narrow_float_encode(DType::Float8E4M3FN, -0.0, true), 0x80u);
  EXPECT_TRUE(std::isnan(narrow_decode(DType::Float8E5M2, narrow_float_encode(DType::Float8E5M2, NAN, true))));
  EXPECT_TRUE(std::isnan(narrow_decode(DType::Float8E4M3FNUZ, narrow_float_encode(DType::Float8E4M3FNUZ, NAN, false))));
  // e2m1 has no NaN or infinity: it always saturates.
  EXPECT_EQ(narrow_float_encode(DType::Float4E2M1, 100, false), 0x7u);
  EXPECT_EQ(narrow_float_encode(DType::Float4E2M1, -INFINITY, false), 0xfu);
}

TEST(NarrowTypes, E8m0RoundsToAPowerOfTwoByMode) {
  using P = PowerRounding;
  EXPECT_EQ(narrow_float_encode(DType::Float8E8M0, 1.0, true, P::Up), 127u);
  EXPECT_EQ(narrow_float_encode(DType::Float8E8M0, 1.25, true, P::Up), 128u);
  EXPECT_EQ(narrow_float_encode(DType::Float8E8M0, 1.75, true, P::Down), 127u);
  EXPECT_EQ(narrow_float_encode(DType::Float8E8M0, 1.25, true, P::Nearest), 127u);
  EXPECT_EQ(narrow_float_encode(DType::Float8E8M0, 1.5, true, P::Nearest), 128u);  // ties up
  EXPECT_EQ(narrow_float_encode(DType::Float8E8M0, 0.0, true, P::Up), 0u);
  const double top = std::ldexp(1.5, 127);
  EXPECT_EQ(narrow_float_encode(DType::Float8E8M0, top, true, P::Up), 254u);
  EXPECT_EQ(narrow_float_encode(DType::Float8E8M0, top, false, P::Up), 255u);
  EXPECT_EQ(narrow_float_encode(DType::Float8E8M0, INFINITY, true, P::Up), 255u);
  Node cast;
  cast.name = "c";
  cast.op_type = "Cast";
  cast.attrs["round_mode"] = std::string("nearest");
  EXPECT_EQ(narrow_cast_rule(cast).power, P::Nearest);
  cast.attrs["round_mode"] = std::string("even");
  EXPECT_THROW(narrow_cast_rule(cast), Error);
}

TEST(NarrowTypes, IntegerCastsTruncateAndWrap) {
  EXPECT_EQ(narrow_int_wrap(DType::Int4, -1), 0xfu);
  EXPECT_EQ(narrow_int_wrap(DType::UInt2, 6), 0x2u);
  EXPECT_EQ(narrow_int_from_float(DType::Int4, 7.9), 7u);
  EXPECT_EQ(narrow_int_from_float(DType::Int4, 8.5), 0x8u);  // 8 wraps to -8
  EXPECT_EQ(narrow_int_from_float(DType::Int4, -2.7), 0xeu);
  EXPECT_EQ(narrow_int_from_float(DType::Int2, NAN), 0u);
  EXPECT_EQ(narrow_int_from_float(DType::UInt4, 1e10), 0u);
  EXPECT_EQ(narrow_int_min(DType::Int2), -2);
  EXPECT_EQ(narrow_int_max(DType::UInt4), 15);
}

TEST(NarrowTypes, PackingPutsTheFirstElementInTheLowBits) {
  uint8_t bytes[2] = {0, 0};
  store_code(bytes, DType::Int2, 0, 1);
  store_code(bytes, DType::Int2, 1, 2);
  store_code(bytes, DType::Int2, 3, 3);
  store_code(bytes, DType::Int2, 4, 1);
  EXPECT_EQ(bytes[0], 0b11'00'10'01);
  EXPECT_EQ(bytes[1], 0b01);
  store_code(bytes, DType::Int2, 1, 0);  // a rewrite leaves its neighbours
  EXPECT_EQ(bytes[0], 0b11'00'00'01);
  EXPECT_EQ(load_code(bytes, DType::Int2, 3), 3u);
  EXPECT_EQ(load_code(bytes, DType::UInt4, 1), 0xcu);
}

TEST(NarrowTypes, TensorsHoldThemPacked) {
  Tensor t = Tensor::from_ints(DType::Int4, {5}, std::vector<int64_t>{1, -1, 7, -8, 3});
  EXPECT_EQ(t.byte_size(), 3u);
  EXPECT_EQ(std::to_integer<int>(t.data()[0]), 0xf1);
  EXPECT_EQ(t.to_ints(), (std::vector<int64_t>{1, -1, 7, -8, 3}));
  EXPECT_EQ(t.get_double(3), -8.0);
  Tensor f(DType::Float8E4M3FN, {2});
  f.set_double(0, 0.3);  // set_double rounds to nearest and saturates
  f.set_double(1, 1e6);
  EXPECT_EQ(f.code(0), narrow_float_encode(DType::Float8E4M3FN, 0.3, true));
  EXPECT_EQ(f.get_double(1), 448.0);
  const Tensor m = Tensor::from_ints(DType::UInt2, {2, 3}, std::vector<int64_t>{0, 1, 2, 3, 2, 1});
  EXPECT_EQ(m.leading(1, 2).to_ints(), (std::vector<int64_t>{0, 1, 3, 2}));
}

// Ops that compute refuse the narrow types by name (kiln never computes in them), and Cast refuses a
// rounding mode it does not know.
TEST(NarrowTypes, OnlyConversionsAndReshapesTakeThem) {
  ModelBuilder add("add_float8", 25, 13);
  add.input("a", DType::Float8E4M3FN, Shape{2});
  add.node("Add", {"a", "a"}, {"y"});
  add.output("y", DType::Float8E4M3FN, Shape{2});
  try {
    testing::prepared_graph(add);
    ADD_FAILURE() << "Add on float8 was accepted";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("has dtype float8e4m3fn, which Add does not take"), std::string::npos) << e.what();
  }
  ModelBuilder cast("bad_round_mode", 25, 13);
  cast.input("x", DType::Float32, Shape{2});
  cast.node("Cast", {"x"}, {"y"}).attr("to", static_cast<int64_t>(DType::Float8E8M0)).attr("round_mode", std::string("even"));
  cast.output("y", DType::Float8E8M0, Shape{2});
  EXPECT_THROW(testing::prepared_graph(cast), Error);
  ModelBuilder reshape("reshape_int4", 25, 13);
  reshape.input("x", DType::Int4, Shape{2, 3});
  reshape.initializer("shape", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{6}));
  reshape.node("Reshape", {"x", "shape"}, {"y"});
  reshape.output("y", DType::Int4, Shape{6});
  EXPECT_EQ(testing::prepared_graph(reshape).value("y").dtype, DType::Int4);
}

}  // namespace
}  // namespace kiln
