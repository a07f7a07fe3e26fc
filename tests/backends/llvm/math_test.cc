// Accuracy of the inline float32 math (backends/llvm/math_polynomials.cc): a package applying each op to
// a dense sweep of inputs over the whole float range is compiled and run natively, and compared with
// std:: in double. The bound checked (rel 1e-5 + abs 1e-6) is ten times inside kiln's conformance
// tolerance; fmod must be exact.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>

#include "frontend/onnx/model_builder.h"
#include "tests/frontend/test_models.h"
#include "toolchain/run_package.h"
#include "toolchain/pipeline.h"

namespace kiln {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Magnitudes from subnormal to FLT_MAX (log-spaced), a fine linear sweep of [-12, 12], both signs,
// and the special values.
std::vector<float> unary_sweep() {
  std::vector<float> v = {0.0f, -0.0f, kInf, -kInf, kNaN, 1.0f, -1.0f, 1e-45f, 3.4028235e38f, -3.4028235e38f};
  for (int i = 0; i <= 2000; ++i) {
    float m = static_cast<float>(std::pow(10.0, -44.0 + 82.5 * i / 2000.0));
    v.push_back(m);
    v.push_back(-m);
  }
  for (int i = 0; i <= 8000; ++i) v.push_back(-12.0f + 24.0f * static_cast<float>(i) / 8000.0f);
  for (int i = 0; i <= 2000; ++i) v.push_back(-1.0f + 2.0f * static_cast<float>(i) / 2000.0f);  // asin, acos, atanh
  for (int i = 0; i <= 2000; ++i) v.push_back(1.0f + std::ldexp(static_cast<float>(i), -12));   // acosh near 1
  // Near multiples of pi/2, large and small.
  for (int k = -50; k <= 50; ++k) v.push_back(static_cast<float>(k * 1.5707963267948966));
  for (float big : {1e5f, 1e10f, 1e20f, 1e30f, 1e38f})
    for (int k = 0; k < 20; ++k) v.push_back(std::nextafter(big, kInf) * (1.0f + static_cast<float>(k) * 1e-3f));
  return v;
}

bool close(double got, double want, double rtol, double atol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

std::vector<Tensor> compile_and_run(ModelBuilder& mb, const std::map<std::string, Tensor>& inputs,
                                    const testing::TempDir& dir) {
  mb.save(dir.path("m.onnx"));
  Graph g = load_model(dir.path("m.onnx"), PipelineOptions{});
  CompileOptions c;
  c.target = resolve_target("host");
  compile_graph(g, c, dir.path("pkg"));
  return run_package(dir.path("pkg"), c.target, inputs, 1).outputs;
}

TEST(InlineMath, UnaryFloat32MatchesStd) {
  struct Op {
    const char* name;
    double (*ref)(double);
  };
  const std::vector<Op> ops = {
      {"Sin", [](double x) { return std::sin(x); }},     {"Cos", [](double x) { return std::cos(x); }},
      {"Tan", [](double x) { return std::tan(x); }},     {"Asin", [](double x) { return std::asin(x); }},
      {"Acos", [](double x) { return std::acos(x); }},   {"Atan", [](double x) { return std::atan(x); }},
      {"Sinh", [](double x) { return std::sinh(x); }},   {"Cosh", [](double x) { return std::cosh(x); }},
      {"Asinh", [](double x) { return std::asinh(x); }}, {"Acosh", [](double x) { return std::acosh(x); }},
      {"Atanh", [](double x) { return std::atanh(x); }}, {"Exp", [](double x) { return std::exp(x); }},
      {"Log", [](double x) { return std::log(x); }},     {"Tanh", [](double x) { return std::tanh(x); }},
  };
  std::vector<float> xs = unary_sweep();
  const int64_t n = static_cast<int64_t>(xs.size());
  ModelBuilder mb("math");
  mb.input("x", DType::Float32, Shape{n});
  for (const Op& op : ops) {
    mb.node(op.name, {"x"}, {std::string("y_") + op.name});
    mb.output(std::string("y_") + op.name, DType::Float32, Shape{n});
  }
  Tensor x(DType::Float32, Shape{n});
  for (int64_t i = 0; i < n; ++i) x.set_double(i, xs[static_cast<size_t>(i)]);
  testing::TempDir dir;
  std::vector<Tensor> outs = compile_and_run(mb, {{"x", x}}, dir);
  ASSERT_EQ(outs.size(), ops.size());
  for (size_t k = 0; k < ops.size(); ++k) {
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      double in = xs[static_cast<size_t>(i)];
      // The float result of the exact value (so overflow to inf matches).
      double want = static_cast<float>(ops[k].ref(in));
      double got = outs[k].get_double(i);
      if (!close(got, want, 1e-5, 1e-6) && bad++ < 5)
        ADD_FAILURE() << ops[k].name << "(" << in << ") = " << got << ", want " << want;
    }
    EXPECT_EQ(bad, 0) << ops[k].name;
  }
}

TEST(InlineMath, PowAndFmodFloat32MatchStd) {
  std::vector<float> xs, ys;
  const std::vector<float> special = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f,  -0.5f,  3.0f,  -3.0f, 2.5f,
                                      -2.5f, 1e-3f, 1e3f, kInf, -kInf, kNaN, 1e-40f, 1e30f, -1e30f, 7.0f, 100.0f, -101.0f};
  for (float a : special)
    for (float b : special) xs.push_back(a), ys.push_back(b);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> mag(-40.0, 38.0), unit(-1.0, 1.0);
  for (int i = 0; i < 20000; ++i) {  // any magnitudes (fmod: ratios up to 2^250; pow: mostly 0 / inf)
    xs.push_back(static_cast<float>(std::copysign(std::pow(10.0, mag(rng)), unit(rng))));
    ys.push_back(static_cast<float>(std::copysign(std::pow(10.0, mag(rng)), unit(rng))));
  }
  for (int i = 0; i < 20000; ++i) {  // pow in range: |x| in [1e-3, 1e3], |y| <= 12, integers half the time
    xs.push_back(static_cast<float>(std::copysign(std::pow(10.0, 3 * unit(rng)), unit(rng))));
    double y = 12 * unit(rng);
    ys.push_back(static_cast<float>(i % 2 ? std::round(y) : y));
  }
  const int64_t n = static_cast<int64_t>(xs.size());
  ModelBuilder mb("powmod");
  mb.input("x", DType::Float32, Shape{n});
  mb.input("y", DType::Float32, Shape{n});
  mb.node("Pow", {"x", "y"}, {"p"});
  mb.node("Mod", {"x", "y"}, {"m"}).attr("fmod", int64_t{1});
  mb.output("p", DType::Float32, Shape{n});
  mb.output("m", DType::Float32, Shape{n});
  Tensor x(DType::Float32, Shape{n}), y(DType::Float32, Shape{n});
  for (int64_t i = 0; i < n; ++i) {
    x.set_double(i, xs[static_cast<size_t>(i)]);
    y.set_double(i, ys[static_cast<size_t>(i)]);
  }
  testing::TempDir dir;
  std::vector<Tensor> outs = compile_and_run(mb, {{"x", x}, {"y", y}}, dir);
  ASSERT_EQ(outs.size(), 2u);
  int bad_pow = 0, bad_mod = 0;
  for (int64_t i = 0; i < n; ++i) {
    float a = xs[static_cast<size_t>(i)], b = ys[static_cast<size_t>(i)];
    double want = static_cast<float>(std::pow(static_cast<double>(a), static_cast<double>(b)));
    double got = outs[0].get_double(i);
    bool ok = close(got, want, 1e-5, 0.0) && std::signbit(got) == std::signbit(want);
    if (std::isnan(want)) ok = std::isnan(got);
    if (!ok && bad_pow++ < 5) ADD_FAILURE() << "pow(" << a << ", " << b << ") = " << got << ", want " << want;
    float wm = std::fmod(a, b);
    double gm = outs[1].get_double(i);
    bool okm = std::isnan(wm) ? std::isnan(gm) : (gm == wm && std::signbit(gm) == std::signbit(wm));
    if (!okm && bad_mod++ < 5) ADD_FAILURE() << "fmod(" << a << ", " << b << ") = " << gm << ", want " << wm;
  }
  EXPECT_EQ(bad_pow, 0);
  EXPECT_EQ(bad_mod, 0);
}

// Min and Max (element-wise, and as the accumulator of ReduceMax / MaxPool) are NaN when either
// operand is: the codegen's cheap compare-select must keep that, whichever side the NaN is on.
TEST(InlineMath, MinAndMaxPropagateNaNFromEitherOperand) {
  const std::vector<float> special = {0.0f, -0.0f, 1.0f, -1.0f, 2.5f, -2.5f, 1e-40f, 3e38f, kInf, -kInf, kNaN};
  std::vector<float> xs, ys;
  for (float a : special)
    for (float b : special) xs.push_back(a), ys.push_back(b);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(-10.0f, 10.0f);
  for (int i = 0; i < 4000; ++i) {  // long enough to vectorize; a NaN now and then on either side
    xs.push_back(i % 97 == 3 ? kNaN : unit(rng));
    ys.push_back(i % 89 == 5 ? kNaN : unit(rng));
  }
  const int64_t n = static_cast<int64_t>(xs.size());
  const int64_t rows = 16, cols = 16;  // the pool's input: x's first 256 values as 16x16
  ModelBuilder mb("minmax");
  mb.input("x", DType::Float32, Shape{n});
  mb.input("y", DType::Float32, Shape{n});
  mb.input("img", DType::Float32, Shape{1, 1, rows, cols});
  mb.node("Max", {"x", "y"}, {"max"});
  mb.node("Min", {"x", "y"}, {"min"});
  mb.node("MaxPool", {"img"}, {"pool"})
      .attr("kernel_shape", std::vector<int64_t>{3, 3})
      .attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  mb.output("max", DType::Float32, Shape{n});
  mb.output("min", DType::Float32, Shape{n});
  mb.output("pool", DType::Float32, Shape{1, 1, rows, cols});
  Tensor x(DType::Float32, Shape{n}), y(DType::Float32, Shape{n}), img(DType::Float32, Shape{1, 1, rows, cols});
  for (int64_t i = 0; i < n; ++i) {
    x.set_double(i, xs[static_cast<size_t>(i)]);
    y.set_double(i, ys[static_cast<size_t>(i)]);
  }
  std::vector<float> pixels(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = i == 37 || i == 200 ? kNaN : unit(rng);
  for (int64_t i = 0; i < rows * cols; ++i) img.set_double(i, pixels[static_cast<size_t>(i)]);
  testing::TempDir dir;
  std::vector<Tensor> outs = compile_and_run(mb, {{"x", x}, {"y", y}, {"img", img}}, dir);
  ASSERT_EQ(outs.size(), 3u);
  auto same = [](double got, double want) { return std::isnan(want) ? std::isnan(got) : got == want; };
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    float a = xs[static_cast<size_t>(i)], b = ys[static_cast<size_t>(i)];
    bool nan = std::isnan(a) || std::isnan(b);
    double want_max = nan ? kNaN : std::max(a, b), want_min = nan ? kNaN : std::min(a, b);
    if (!same(outs[0].get_double(i), want_max) && bad++ < 5)
      ADD_FAILURE() << "max(" << a << ", " << b << ") = " << outs[0].get_double(i);
    if (!same(outs[1].get_double(i), want_min) && bad++ < 5)
      ADD_FAILURE() << "min(" << a << ", " << b << ") = " << outs[1].get_double(i);
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double want = -kInf;
      for (int64_t dr = -1; dr <= 1; ++dr)
        for (int64_t dc = -1; dc <= 1; ++dc) {
          if (r + dr < 0 || r + dr >= rows || c + dc < 0 || c + dc >= cols) continue;
          float v = pixels[static_cast<size_t>((r + dr) * cols + c + dc)];
          want = std::isnan(want) || std::isnan(v) ? kNaN : std::max<double>(want, v);
        }
      if (!same(outs[2].get_double(r * cols + c), want) && bad++ < 5)
        ADD_FAILURE() << "pool[" << r << "][" << c << "] = " << outs[2].get_double(r * cols + c) << ", want " << want;
    }
  EXPECT_EQ(bad, 0);
}

}  // namespace
}  // namespace kiln
