// The narrow types in tensor expressions (scheduler/te/narrow_codes.h) against the frontend's codecs
// (frontend/ir/narrow_types.h): every code decoded, a sweep of floats encoded, by the expression
// evaluator and by packages compiled for this host (where loops vectorize), and a packed int4 weight
// dequantized inside the matmul that reads it.
#include "scheduler/te/narrow_codes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "frontend/ir/error.h"
#include "frontend/reference/interpreter.h"
#include "scheduler/te/te_eval.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

const DType kNarrow[] = {DType::Float8E4M3FN, DType::Float8E4M3FNUZ, DType::Float8E5M2, DType::Float8E5M2FNUZ,
                         DType::Float8E8M0,   DType::Float4E2M1,     DType::Int4,       DType::UInt4,
                         DType::Int2,         DType::UInt2};

// Floats that reach every branch: both signs, zeros, NaN, infinities, subnormals of every format,
// ties, values past every format's range, and a random spread of magnitudes.
std::vector<double> float_sweep() {
  std::vector<double> xs = {0.0, -0.0, NAN, -NAN, INFINITY, -INFINITY, 1e30, -1e30, 3e38, 0.5, 1.5, 2.5, -2.5, 7.5,
                            8.5, -8.5, 448, 464, 465, 480, 240, 57344, 61440, 1e-40, std::ldexp(1.0, -127)};
  for (int e = -24; e <= 20; ++e)
    for (double m : {1.0, 1.0625, 1.125, 1.1875, 1.25, 1.375, 1.5, 1.75, 1.875, 1.9375}) {
      xs.push_back(std::ldexp(m, e));
      xs.push_back(-std::ldexp(m, e));
    }
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> exponent(-22, 20), unit(-1, 1);
  for (int i = 0; i < 600; ++i) xs.push_back(unit(rng) * std::exp2(exponent(rng)));
  for (double& x : xs) x = static_cast<float>(x);
  return xs;
}

// Codes are compared as codes: two NaN codes of one type must be the same code too.
void expect_same_codes(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.size(), want.size()) << what;
  int64_t bad = 0;
  for (int64_t i = 0; i < want.size(); ++i)
    if (got.code(i) != want.code(i) && bad++ < 5)
      ADD_FAILURE() << what << " element " << i << ": code " << got.code(i) << ", expected " << want.code(i);
}

TEST(NarrowCodes, ExpressionsDecodeEveryCodeAsTheFrontendDoes) {
  for (DType t : kNarrow) {
    const int64_t n = int64_t{1} << dtype_bits(t);
    te::TensorRef codes = te::placeholder("codes", DType::UInt8, {n});
    te::TensorRef value = te::compute("value", "elementwise", DType::Float32, {n}, [&](const std::vector<te::Expr>& i) {
      return te::narrow_to_float(te::at(codes, i), t);
    });
    std::vector<int64_t> all(static_cast<size_t>(n));
    for (int64_t c = 0; c < n; ++c) all[static_cast<size_t>(c)] = c;
    const std::vector<Tensor> out =
        te::evaluate(te::make_dag({value}), {{codes.get(), Tensor::from_ints(DType::UInt8, {n}, all)}});
    for (int64_t c = 0; c < n; ++c) {
      const double want = narrow_decode(t, static_cast<uint32_t>(c)), got = out[0].get_double(c);
      EXPECT_TRUE((std::isnan(want) && std::isnan(got)) || (want == got && std::signbit(want) == std::signbit(got)))
          << dtype_name(t) << " code " << c << ": " << got << ", expected " << want;
    }
  }
}

TEST(NarrowCodes, ExpressionsEncodeAsTheFrontendDoes) {
  const std::vector<double> xs = float_sweep();
  const int64_t n = static_cast<int64_t>(xs.size());
  te::TensorRef x = te::placeholder("x", DType::Float32, {n});
  const Tensor input = Tensor::from_doubles(DType::Float32, {n}, xs);
  for (DType t : kNarrow)
    for (bool saturate : {true, false})
      for (PowerRounding power : {PowerRounding::Up, PowerRounding::Down, PowerRounding::Nearest}) {
        if (t != DType::Float8E8M0 && power != PowerRounding::Up) continue;
        te::TensorRef code = te::compute("code", "elementwise", DType::UInt8, {n}, [&](const std::vector<te::Expr>& i) {
          const te::Expr v = te::at(x, i);
          return is_narrow_float(t) ? te::float_to_narrow(v, t, saturate, power) : te::to_narrow_int(v, t);
        });
        const Tensor got = te::evaluate(te::make_dag({code}), {{x.get(), input}})[0];  // one code a byte
        int bad = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double v = xs[static_cast<size_t>(i)];
          const uint32_t want = is_narrow_float(t) ? narrow_float_encode(t, v, saturate, power) : narrow_int_from_float(t, v);
          if (static_cast<uint32_t>(got.get_int(i)) != want && bad++ < 5)
            ADD_FAILURE() << dtype_name(t) << (saturate ? " saturating" : "") << " of " << v << ": code "
                          << got.get_int(i) << ", expected " << want;
        }
      }
}

TEST(NarrowCodes, StoredFormsPackBelowAByte) {
  EXPECT_EQ(te::stored_form(DType::Int4, {3, 3}).shape, Shape{5});
  EXPECT_EQ(te::stored_form(DType::Float8E5M2, {3, 3}).shape, (Shape{3, 3}));
  EXPECT_EQ(te::stored_form(DType::Float32, {2}).dtype, DType::Float32);
  const Tensor t = Tensor::from_ints(DType::Int2, {2, 3}, std::vector<int64_t>{1, -1, 0, -2, 1, 1});
  const Tensor s = te::stored_tensor(t);
  EXPECT_EQ(s.dtype(), DType::UInt8);
  EXPECT_EQ(s.shape(), Shape{2});
  EXPECT_EQ(te::tensor_from_stored(s, DType::Int2, {2, 3}).to_ints(), t.to_ints());
  EXPECT_THROW(te::tensor_from_stored(s, DType::Int4, {2, 3}), Error);
}

// One model casting the sweep to every narrow type (saturating and not, e8m0 by every mode) and each
// result back to float32; compiled for this host, its codes and values equal the reference's.
TEST(NarrowCodes, CompiledCastsMatchTheReference) {
  const std::vector<double> xs = float_sweep();
  const int64_t n = static_cast<int64_t>(xs.size());
  ModelBuilder b("narrow_casts", 25, 13);
  b.input("x", DType::Float32, Shape{n});
  int k = 0;
  for (DType t : kNarrow)
    for (int saturate : {1, 0})
      for (const char* mode : {"up", "down", "nearest"}) {
        if (t != DType::Float8E8M0 && std::string(mode) != "up") continue;
        const std::string c = "c" + std::to_string(k), back = "f" + std::to_string(k++);
        auto node = b.node("Cast", {"x"}, {c});
        node.attr("to", static_cast<int64_t>(t)).attr("saturate", static_cast<int64_t>(saturate));
        if (t == DType::Float8E8M0) node.attr("round_mode", std::string(mode));
        b.node("Cast", {c}, {back}).attr("to", static_cast<int64_t>(DType::Float32));
        b.output(c, t, Shape{n});
        b.output(back, DType::Float32, Shape{n});
      }
  const Tensor x = Tensor::from_doubles(DType::Float32, {n}, xs);
  const std::vector<Tensor> want = run_reference(testing::prepared_graph(b), {{"x", x}});
  testing::TempDir dir;
  testing::HostPackage pkg(b, dir);
  const std::vector<Tensor> got = pkg.run({{"x", x}});
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); i += 2) {
    expect_same_codes(got[i], want[i], "output " + std::to_string(i));
    for (int64_t j = 0; j < n; ++j) {
      const double g = got[i + 1].get_double(j), w = want[i + 1].get_double(j);
      EXPECT_TRUE((std::isnan(g) && std::isnan(w)) || g == w) << "output " << i + 1 << " element " << j;
    }
  }
}

// y = x @ DequantizeLinear(w): w an int4 [17, 9] initializer with a per-column scale. The weight stays
// int4 through shape inference (packed, 77 bytes), and the compiled result equals the reference's.
TEST(NarrowCodes, PackedInt4WeightIsDequantizedWhereTheMatmulReadsIt) {
  const int64_t k = 17, m = 9;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int64_t> q(-8, 7);
  std::vector<int64_t> w(static_cast<size_t>(k * m));
  for (int64_t& v : w) v = q(rng);
  ModelBuilder b("int4_matmul", 21, 10);
  b.input("x", DType::Float32, Shape{2, k});
  b.initializer("w", Tensor::from_ints(DType::Int4, {k, m}, w));
  b.initializer("scale", testing::random_weights({m}, 5));
  b.node("DequantizeLinear", {"w", "scale"}, {"wf"}).attr("axis", int64_t{1});
  b.node("MatMul", {"x", "wf"}, {"y"});
  b.output("y", DType::Float32, Shape{2, m});
  const Graph g = testing::prepared_graph(b);
  ASSERT_TRUE(g.value("w").constant);
  EXPECT_EQ(g.value("w").dtype, DType::Int4);
  EXPECT_EQ(g.value("w").constant->byte_size(), 77u);
  EXPECT_FALSE(g.value("wf").constant) << "the dequantized weight was folded into floats";
  const Tensor x = testing::random_weights({2, k}, 9);
  const Tensor want = run_reference(g, {{"x", x}})[0];
  testing::TempDir dir;
  testing::HostPackage pkg(b, dir);
  const Tensor got = pkg.run({{"x", x}})[0];
  for (int64_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got.get_double(i), want.get_double(i), 1e-5) << i;
  EXPECT_LT(pkg.info().weights_bytes, 77 + 4 * m + 64) << "the int4 weight is not stored packed";
}

}  // namespace
}  // namespace kiln
