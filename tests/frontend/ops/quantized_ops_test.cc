// Requantization (frontend/ops/linalg_internal.h): kiln rounds an int32 accumulator to int8/uint8 as
// ONNX Runtime does, the product of the accumulator and the multiplier taken in float32, not in float64
// as ONNX's Python reference takes it. A case where the two disagree pins that down in the reference
// interpreter and in the compiled package.
#include <gtest/gtest.h>

#include <cstring>

#include "frontend/ops/linalg_internal.h"
#include "frontend/partition/partition.h"
#include "frontend/reference/interpreter.h"
#include "tests/frontend/test_models.h"

namespace kiln {
namespace {

// 22756 x 0.00736069586 (the float32 0x3bf131fe) is 167.499995 in float64, and exactly 167.5 once
// rounded to float32: half to even gives 168 in float32 (ONNX Runtime) and 167 in float64.
constexpr int64_t kAcc = 22756;
float tie_multiplier() {
  const uint32_t bits = 0x3bf131fe;
  float m;
  std::memcpy(&m, &bits, sizeof m);
  return m;
}

TEST(Requantize, TheProductIsTakenInFloat32AsOnnxRuntimeTakesIt) {
  const float m = tie_multiplier();
  EXPECT_EQ(linalg::round_half_to_even(static_cast<double>(kAcc) * static_cast<double>(m)), 167.0);  // float64
  EXPECT_EQ(linalg::requantize_float32(kAcc, m, 0.0), 168.0);
  EXPECT_EQ(linalg::requantize_float32(kAcc, m, 10.0), 178.0);  // the zero point after rounding
  EXPECT_EQ(linalg::requantize_float32(-kAcc, m, 0.0), -168.0);
}

// QLinearMatMul [1, 3] x [3, 1] in uint8 whose accumulator is 127*127 + 127*52 + 23*1 = 22756, with
// a_scale the tie multiplier and the other scales 1: the output is 168, in the reference interpreter and
// in the package compiled for this host.
TEST(Requantize, QLinearMatMulRoundsAsOnnxRuntimeInTheReferenceAndCompiled) {
  ModelBuilder b("qmatmul_tie", 13);
  b.input("a", DType::UInt8, Shape{1, 3});
  b.initializer("b", Tensor::from_ints(DType::UInt8, {3, 1}, std::vector<int64_t>{127, 52, 1}));
  b.initializer("a_scale", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{tie_multiplier()}));
  b.initializer("one", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{1.0}));
  b.initializer("zero", Tensor::from_ints(DType::UInt8, {}, std::vector<int64_t>{0}));
  b.node("QLinearMatMul", {"a", "a_scale", "zero", "b", "one", "zero", "one", "zero"}, {"y"});
  b.output("y", DType::UInt8, Shape{1, 1});
  const Tensor a = Tensor::from_ints(DType::UInt8, {1, 3}, std::vector<int64_t>{127, 127, 23});
  const Graph g = testing::prepared_graph(b);
  EXPECT_EQ(run_reference(g, {{"a", a}})[0].get_int(0), 168);
  testing::TempDir dir;
  testing::HostPackage pkg(b, dir);
  EXPECT_EQ(pkg.run({{"a", a}})[0].get_int(0), 168);
}

// The same accumulator from QLinearConv, a 1x1 convolution over 3 channels (its own lowering).
TEST(Requantize, QLinearConvRoundsAsOnnxRuntimeInTheReferenceAndCompiled) {
  ModelBuilder b("qconv_tie", 13);
  b.input("x", DType::UInt8, Shape{1, 3, 1, 1});
  b.initializer("w", Tensor::from_ints(DType::UInt8, {1, 3, 1, 1}, std::vector<int64_t>{127, 52, 1}));
  b.initializer("x_scale", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{tie_multiplier()}));
  b.initializer("one", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{1.0}));
  b.initializer("zero", Tensor::from_ints(DType::UInt8, {}, std::vector<int64_t>{0}));
  b.node("QLinearConv", {"x", "x_scale", "zero", "w", "one", "zero", "one", "zero"}, {"y"});
  b.output("y", DType::UInt8, Shape{1, 1, 1, 1});
  const Tensor x = Tensor::from_ints(DType::UInt8, {1, 3, 1, 1}, std::vector<int64_t>{127, 127, 23});
  const Graph g = testing::prepared_graph(b);
  EXPECT_EQ(run_reference(g, {{"x", x}})[0].get_int(0), 168);
  testing::TempDir dir;
  testing::HostPackage pkg(b, dir);
  EXPECT_EQ(pkg.run({{"x", x}})[0].get_int(0), 168);
}

// The int32 accumulator of a QLinearConv (and of a QLinearMatMul) is finished by the requantization
// inside the reduction's loop nest, so the package stores none: its workspace holds the per-channel
// multipliers at most, not 4 bytes an output element (ds_cnn_int8's arena: 72,000 -> 40,256 bytes).
TEST(Requantize, TheAccumulatorIsNeverStored) {
  ModelBuilder b("qconv_workspace", 13);
  b.input("x", DType::UInt8, Shape{1, 8, 6, 6});
  std::vector<int64_t> w(8 * 8 * 9);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int64_t>(i % 7) - 3;
  b.initializer("w", Tensor::from_ints(DType::Int8, {8, 8, 3, 3}, w));
  b.initializer("x_scale", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{0.02}));
  b.initializer("w_scale", Tensor::from_doubles(DType::Float32, {8}, std::vector<double>(8, 0.01)));
  b.initializer("y_scale", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{0.05}));
  b.initializer("x_zero", Tensor::from_ints(DType::UInt8, {}, std::vector<int64_t>{128}));
  b.initializer("w_zero", Tensor::from_ints(DType::Int8, {8}, std::vector<int64_t>(8, 0)));
  b.initializer("y_zero", Tensor::from_ints(DType::UInt8, {}, std::vector<int64_t>{120}));
  b.initializer("bias", Tensor::from_ints(DType::Int32, {8}, std::vector<int64_t>{1, -2, 3, -4, 5, -6, 7, -8}));
  b.node("QLinearConv", {"x", "x_scale", "x_zero", "w", "w_scale", "w_zero", "y_scale", "y_zero", "bias"}, {"y"})
      .attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  b.output("y", DType::UInt8, Shape{1, 8, 6, 6});
  testing::TempDir dir;
  testing::HostPackage pkg(b, dir);
  EXPECT_LT(pkg.info().workspace_size, 8 * 6 * 6 * 4) << "the int32 accumulator has a buffer of its own";
  std::vector<int64_t> xv(8 * 6 * 6);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<int64_t>((i * 37) % 256);
  const Tensor x = Tensor::from_ints(DType::UInt8, {1, 8, 6, 6}, xv);
  EXPECT_EQ(pkg.run({{"x", x}})[0].to_ints(), run_reference(testing::prepared_graph(b), {{"x", x}})[0].to_ints());
}

// A QLinearConv whose output is dequantized only to be averaged (DS-CNN's tail): the
// DequantizeLinear goes with the pool, computed inside its reduction, so the int8 output crosses
// between the subgraphs and no float32 copy of it is ever stored (ds_cnn_int8 on the M4: arena
// 40,256 -> 16,256 bytes). The average equals the reference's up to float32 rounding (the summation
// orders differ); against ONNX Runtime, ds_cnn_int8 and ds_cnn_qdq stay bit-exact (ctest ort.zoo.*).
TEST(Requantize, ADequantizedOutputThatIsOnlyAveragedIsNeverStoredWide) {
  ModelBuilder b("qconv_pool", 13);
  b.input("x", DType::UInt8, Shape{1, 8, 10, 10});
  std::vector<int64_t> w(16 * 8);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int64_t>(i % 9) - 4;
  b.initializer("w", Tensor::from_ints(DType::Int8, {16, 8, 1, 1}, w));
  b.initializer("x_scale", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{0.02}));
  b.initializer("w_scale", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{0.01}));
  b.initializer("y_scale", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{0.05}));
  b.initializer("x_zero", Tensor::from_ints(DType::UInt8, {}, std::vector<int64_t>{128}));
  b.initializer("w_zero", Tensor::from_ints(DType::Int8, {}, std::vector<int64_t>{0}));
  b.initializer("y_zero", Tensor::from_ints(DType::UInt8, {}, std::vector<int64_t>{120}));
  b.node("QLinearConv", {"x", "x_scale", "x_zero", "w", "w_scale", "w_zero", "y_scale", "y_zero"}, {"q"});
  b.node("DequantizeLinear", {"q", "y_scale", "y_zero"}, {"f"});
  b.node("GlobalAveragePool", {"f"}, {"y"});
  b.output("y", DType::Float32, Shape{1, 16, 1, 1});
  const Graph g = testing::prepared_graph(b);
  const SubgraphDAG sdag = partition_graph(g);
  ASSERT_EQ(sdag.subgraphs.size(), 2u);
  EXPECT_EQ(sdag.edges.at(0).value, "q") << "the float32 value crosses instead of the uint8 one";
  testing::TempDir dir;
  testing::HostPackage pkg(b, dir);
  EXPECT_LT(pkg.info().workspace_size, 16 * 10 * 10 * 4) << "the dequantized features have a buffer of their own";
  std::vector<int64_t> xv(8 * 10 * 10);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<int64_t>((i * 37) % 256);
  const std::map<std::string, Tensor> in = {{"x", Tensor::from_ints(DType::UInt8, {1, 8, 10, 10}, xv)}};
  const Tensor got = pkg.run(in)[0], want = run_reference(g, in)[0];
  for (int64_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got.get_double(i), want.get_double(i), 1e-7) << i;
}

// A conv's dequantized output that something else than a reduction reads (a Relu) stays in the
// conv's subgraph, as before: only a reduction takes the widening op.
TEST(Requantize, ADequantizedOutputReadElementwiseStaysWithTheConv) {
  ModelBuilder b("qconv_relu", 13);
  b.input("x", DType::UInt8, Shape{1, 4, 5, 5});
  b.initializer("w", Tensor::from_ints(DType::Int8, {4, 4, 1, 1}, std::vector<int64_t>(16, 3)));
  b.initializer("s", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{0.02}));
  b.initializer("z", Tensor::from_ints(DType::UInt8, {}, std::vector<int64_t>{128}));
  b.initializer("wz", Tensor::from_ints(DType::Int8, {}, std::vector<int64_t>{0}));
  b.node("QLinearConv", {"x", "s", "z", "w", "s", "wz", "s", "z"}, {"q"});
  b.node("DequantizeLinear", {"q", "s", "z"}, {"f"});
  b.node("Relu", {"f"}, {"y"});
  b.output("y", DType::Float32, Shape{1, 4, 5, 5});
  EXPECT_EQ(partition_graph(testing::prepared_graph(b)).subgraphs.size(), 1u);
}

// MatMulInteger with constant uint8 weights and per-column zero points, batched uint8 activations and
// their zero point a run-time input (as DynamicQuantizeLinear makes it): compiled, the zero points
// leave the inner loop (sum a*b less the row-sum, column-sum and k*za*zb terms); the integers equal
// the reference's, and so does a second run with another zero point.
TEST(Requantize, MatMulIntegerWithWeightZeroPointsEqualsTheReference) {
  ModelBuilder b("matmul_integer_zp", 13);
  b.input("a", DType::UInt8, Shape{2, 3, 5});
  b.input("a_zero", DType::UInt8, Shape{});
  std::vector<int64_t> w(5 * 4);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<int64_t>((i * 53) % 256);
  b.initializer("w", Tensor::from_ints(DType::UInt8, {5, 4}, w));
  b.initializer("w_zero", Tensor::from_ints(DType::UInt8, {4}, std::vector<int64_t>{128, 0, 7, 255}));
  b.node("MatMulInteger", {"a", "w", "a_zero", "w_zero"}, {"y"});
  b.output("y", DType::Int32, Shape{2, 3, 4});
  std::vector<int64_t> av(2 * 3 * 5);
  for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<int64_t>((i * 97 + 11) % 256);
  const Tensor a = Tensor::from_ints(DType::UInt8, {2, 3, 5}, av);
  const Graph g = testing::prepared_graph(b);
  testing::TempDir dir;
  testing::HostPackage pkg(b, dir);
  for (int64_t zero : {0, 131}) {
    const std::map<std::string, Tensor> in = {{"a", a}, {"a_zero", Tensor::scalar_int(DType::UInt8, zero)}};
    EXPECT_EQ(pkg.run(in)[0].to_ints(), run_reference(g, in)[0].to_ints()) << "a_zero " << zero;
  }
}

}  // namespace
}  // namespace kiln
