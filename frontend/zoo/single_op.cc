// Single-op models for benchmarks: one MatMul or Conv with a weight initializer, the shapes set from
// the command line. Defaults are layers the Ansor paper benchmarks in isolation: a 1024^3 matmul,
// ResNet-50's stage-1 3x3 conv (1x64x56x56, 64 filters, pad 1) and a 3x3 depthwise conv on
// 1x128x56x56; a ConvTranspose (conv_transpose2d: give it dcgan's --kernel 4 --stride 2 --padding 1);
// a MaxPool on 1x128x13x13 (maxpool2d: give it YOLOX's largest SPP pool's --kernel 13 --padding 6).
#include "frontend/zoo/zoo_models.h"

#include <cmath>

#include "frontend/ir/error.h"
#include "frontend/zoo/cnn_layers.h"

namespace kiln {
namespace {

void require_positive(int64_t v, const char* flag) {
  if (v < 1) throw Error(std::string("zoo: --") + flag + " must be positive");
}

// A conv-only model: image [batch, in, size, size] -> Conv (no bias, as in ResNet/MobileNet) -> output.
ModelBuilder single_conv(const std::string& name, const ZooOptions& o, int64_t in_channels, int64_t out_channels,
                         int64_t group) {
  require_positive(o.kernel, "kernel");
  require_positive(o.stride, "stride");
  if (o.padding < 0) throw Error("zoo: --padding must not be negative");
  WeightInit w(o.seed);
  ModelBuilder b(name, 17);
  CnnBuilder c(b, w);
  const int64_t size = o.size > 0 ? o.size : 56;
  FeatureMap x = c.input("input", o.batch, in_channels, {size, size});
  FeatureMap y = c.conv(x, "conv", {out_channels, {o.kernel, o.kernel}, {o.stride, o.stride}, {o.padding, o.padding}, group});
  b.output(y.name, DType::Float32, Shape{o.batch, y.channels, y.spatial[0], y.spatial[1]});
  return b;
}

}  // namespace

// A [M, K] (or [batch, M, K] when --batch > 1) x weight B [K, N].
ModelBuilder build_matmul(const ZooOptions& o) {
  require_positive(o.m, "m");
  require_positive(o.n, "n");
  require_positive(o.k, "k");
  require_positive(o.batch, "batch");
  WeightInit w(o.seed);
  ModelBuilder b("matmul", 17);
  Shape a_shape{o.m, o.k}, y_shape{o.m, o.n};
  if (o.batch > 1) {
    a_shape.insert(a_shape.begin(), o.batch);
    y_shape.insert(y_shape.begin(), o.batch);
  }
  b.input("A", DType::Float32, a_shape);
  b.initializer("B", xavier_uniform(w, {o.k, o.n}, o.k, o.n));
  b.node("MatMul", {"A", "B"}, {"Y"}, "matmul");
  b.output("Y", DType::Float32, y_shape);
  return b;
}

namespace {

// The sizes of an int8 matmul model, checked, and its builder with the float input A [m, k] and
// the int8 weight B [k, n] (symmetric: uniform in [-127, 127]).
ModelBuilder int8_matmul_model(const std::string& name, const ZooOptions& o, WeightInit& w) {
  require_positive(o.m, "m");
  require_positive(o.n, "n");
  require_positive(o.k, "k");
  ModelBuilder b(name, 13);
  b.input("A", DType::Float32, Shape{o.m, o.k});
  std::vector<double> q(static_cast<size_t>(o.k * o.n));
  for (double& v : q) v = std::round(w.uniform(-127.0, 127.0));
  b.initializer("B", Tensor::from_doubles(DType::Int8, {o.k, o.n}, q));
  return b;
}

}  // namespace

// The int8 form of `matmul`, as ONNX Runtime's quantizer writes a linear layer in QOperator form:
// float A -> QuantizeLinear (uint8, zero point 128) -> QLinearMatMul with int8 weights (symmetric,
// a scale per column) -> DequantizeLinear. The scales keep the output's spread inside uint8.
ModelBuilder build_qmatmul(const ZooOptions& o) {
  WeightInit w(o.seed);
  ModelBuilder b = int8_matmul_model("qmatmul", o, w);
  std::vector<double> col_scales(static_cast<size_t>(o.n));
  for (double& s : col_scales) s = w.uniform(0.7, 1.3) / 127.0;
  const double a_scale = 1.0 / 127;  // A in [-1, 1)
  // sum_k of k products of uniform values spreads as sqrt(k / 9): four of those span the output.
  const double y_scale = 4.0 * std::sqrt(static_cast<double>(o.k) / 9.0) / 127.0;
  b.initializer("a_scale", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{a_scale}));
  b.initializer("a_zero", Tensor::from_ints(DType::UInt8, {}, std::vector<int64_t>{128}));
  b.initializer("b_scale", Tensor::from_doubles(DType::Float32, {o.n}, col_scales));
  b.initializer("b_zero", Tensor::from_ints(DType::Int8, {o.n}, std::vector<int64_t>(static_cast<size_t>(o.n), 0)));
  b.initializer("y_scale", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{y_scale}));
  b.initializer("y_zero", Tensor::from_ints(DType::UInt8, {}, std::vector<int64_t>{128}));
  b.node("QuantizeLinear", {"A", "a_scale", "a_zero"}, {"A.q"}, "quantize");
  b.node("QLinearMatMul", {"A.q", "a_scale", "a_zero", "B", "b_scale", "b_zero", "y_scale", "y_zero"}, {"Y.q"}, "qmatmul");
  b.node("DequantizeLinear", {"Y.q", "y_scale", "y_zero"}, {"Y"}, "dequantize");
  b.output("Y", DType::Float32, Shape{o.m, o.n});
  return b;
}

// Requantization's edge cases in one model, to check compiled code against the reference value by
// value: an int8 input A [24, 1] times B = [1 1 1 1] with a scale per column, so column j's
// accumulator is A's value times the multiplier b_scale[j] / 2: 0.5 and 1.5 put every odd input on
// a tie (half to even), 500 saturates all but 0, and an infinite scale gives +-inf and, for 0,
// NaN. Requantized to int8 with zero point 5 and to uint8 with 250 (both bounds, saturating adds),
// then dequantized with scale 1 and zero point 0: the outputs are the stored integers. A float input
// F is quantized too (QuantizeLinear's own rounding and saturation).
ModelBuilder build_requantize_edges(const ZooOptions&) {
  ModelBuilder b("requantize_edges", 13);
  const int64_t rows = 24, columns = 4;
  b.input("A", DType::Int8, Shape{rows, 1});
  b.initializer("B", Tensor::from_ints(DType::Int8, {1, columns}, std::vector<int64_t>(columns, 1)));
  b.initializer("one", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{1.0}));
  b.initializer("two", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{2.0}));
  b.initializer("zero_i8", Tensor::from_ints(DType::Int8, {}, std::vector<int64_t>{0}));
  b.initializer("b_scale", Tensor::from_doubles(DType::Float32, {columns}, std::vector<double>{1.0, 3.0, 1000.0, INFINITY}));
  b.initializer("b_zero", Tensor::from_ints(DType::Int8, {columns}, std::vector<int64_t>(columns, 0)));
  b.initializer("y_zero_i8", Tensor::from_ints(DType::Int8, {}, std::vector<int64_t>{5}));
  b.initializer("y_zero_u8", Tensor::from_ints(DType::UInt8, {}, std::vector<int64_t>{250}));
  b.initializer("zero_u8", Tensor::from_ints(DType::UInt8, {}, std::vector<int64_t>{0}));
  for (const char* out : {"i8", "u8"}) {
    const std::string y = std::string("Y.") + out;
    b.node("QLinearMatMul", {"A", "one", "zero_i8", "B", "b_scale", "b_zero", "two", std::string("y_zero_") + out}, {y + ".q"},
           y + ".requantize");
    b.node("DequantizeLinear", {y + ".q", "one", std::string("zero_") + out}, {y}, y + ".stored");
    b.output(y, DType::Float32, Shape{rows, columns});
  }
  // QuantizeLinear of a float input F [8] by 0.5 with zero point -3 (ties at x.25 and x.75, NaN to
  // the zero point, infinities and 2^23 saturating).
  b.input("F", DType::Float32, Shape{8});
  b.initializer("half", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{0.5}));
  b.initializer("zero_m3", Tensor::from_ints(DType::Int8, {}, std::vector<int64_t>{-3}));
  b.node("QuantizeLinear", {"F", "half", "zero_m3"}, {"F.q"}, "F.quantize");
  b.node("DequantizeLinear", {"F.q", "one", "zero_i8"}, {"F.i8"}, "F.stored");
  b.output("F.i8", DType::Float32, Shape{8});
  return b;
}

// ONNX Runtime's dynamic quantization of a linear layer (quantize_dynamic, how int8 transformers
// are shipped for CPUs): A's range measured at run time (DynamicQuantizeLinear to uint8), an integer
// matmul by a constant int8 B (MatMulInteger, B symmetric), the int32 result cast to float and
// scaled by A's scale times B's.
ModelBuilder build_dqmatmul(const ZooOptions& o) {
  WeightInit w(o.seed);
  ModelBuilder b = int8_matmul_model("dqmatmul", o, w);
  b.initializer("b_scale", Tensor::from_doubles(DType::Float32, {}, std::vector<double>{1.0 / 127}));
  b.node("DynamicQuantizeLinear", {"A"}, {"A.q", "A.scale", "A.zero"}, "quantize");
  b.node("MatMulInteger", {"A.q", "B", "A.zero"}, {"Y.int"}, "matmul");
  b.node("Cast", {"Y.int"}, {"Y.float"}, "cast").attr("to", int64_t{1});
  b.node("Mul", {"A.scale", "b_scale"}, {"Y.scale"}, "scales");
  b.node("Mul", {"Y.float", "Y.scale"}, {"Y"}, "rescale");
  b.output("Y", DType::Float32, Shape{o.m, o.n});
  return b;
}

// Both operands are inputs, as attention's Q x K^T and A x V, whose right-hand side is computed at
// run time and so cannot be repacked when compiling: [batch, m, k] x [batch, k, n].
ModelBuilder build_batch_matmul(const ZooOptions& o) {
  require_positive(o.m, "m");
  require_positive(o.n, "n");
  require_positive(o.k, "k");
  require_positive(o.batch, "batch");
  ModelBuilder b("batch_matmul", 17);
  b.input("A", DType::Float32, Shape{o.batch, o.m, o.k});
  b.input("B", DType::Float32, Shape{o.batch, o.k, o.n});
  b.node("MatMul", {"A", "B"}, {"Y"}, "matmul");
  b.output("Y", DType::Float32, Shape{o.batch, o.m, o.n});
  return b;
}

ModelBuilder build_conv2d(const ZooOptions& o) {
  const int64_t in = o.in_channels > 0 ? o.in_channels : 64;
  const int64_t out = o.out_channels > 0 ? o.out_channels : 64;
  require_positive(o.group, "group");
  if (in % o.group != 0 || out % o.group != 0) throw Error("zoo: conv2d: --in-channels and --out-channels must be multiples of --group");
  return single_conv("conv2d", o, in, out, o.group);
}

// group = channels; --out-channels, when given, must be a multiple of --in-channels (a channel
// multiplier, as in TensorFlow's depthwise conv).
ModelBuilder build_depthwise(const ZooOptions& o) {
  const int64_t channels = o.in_channels > 0 ? o.in_channels : 128;
  const int64_t out = o.out_channels > 0 ? o.out_channels : channels;
  if (out % channels != 0) throw Error("zoo: depthwise: --out-channels must be a multiple of --in-channels");
  return single_conv("depthwise", o, channels, out, channels);
}

// image [batch, in, size, size] -> ConvTranspose (no bias) -> output, defaults dcgan's fourth layer
// (128 -> 64 channels at 16x16) when the channels and size are not given.
ModelBuilder build_conv_transpose2d(const ZooOptions& o) {
  require_positive(o.kernel, "kernel");
  require_positive(o.stride, "stride");
  require_positive(o.batch, "batch");
  if (o.padding < 0) throw Error("zoo: --padding must not be negative");
  const int64_t in = o.in_channels > 0 ? o.in_channels : 128;
  const int64_t out = o.out_channels > 0 ? o.out_channels : 64;
  const int64_t size = o.size > 0 ? o.size : 16;
  const int64_t out_size = (size - 1) * o.stride + o.kernel - 2 * o.padding;
  if (out_size < 1) throw Error("zoo: conv_transpose2d: --padding leaves no output");
  WeightInit w(o.seed);
  ModelBuilder b("conv_transpose2d", 17);
  b.input("input", DType::Float32, Shape{o.batch, in, size, size});
  b.initializer("weight", xavier_uniform(w, {in, out, o.kernel, o.kernel}, in * o.kernel * o.kernel, out * o.kernel * o.kernel));
  b.node("ConvTranspose", {"input", "weight"}, {"output"}, "deconv")
      .attr("strides", std::vector<int64_t>{o.stride, o.stride})
      .attr("pads", std::vector<int64_t>{o.padding, o.padding, o.padding, o.padding});
  b.output("output", DType::Float32, Shape{o.batch, out, out_size, out_size});
  return b;
}

// image [batch, channels, size, size] -> MaxPool (square kernel, stride and padding) -> output.
ModelBuilder build_maxpool2d(const ZooOptions& o) {
  require_positive(o.kernel, "kernel");
  require_positive(o.stride, "stride");
  require_positive(o.batch, "batch");
  if (o.padding < 0 || o.padding >= o.kernel) throw Error("zoo: maxpool2d: --padding must be in [0, kernel)");
  const int64_t channels = o.in_channels > 0 ? o.in_channels : 128;
  const int64_t size = o.size > 0 ? o.size : 13;
  const int64_t out_size = (size + 2 * o.padding - o.kernel) / o.stride + 1;
  if (size + 2 * o.padding < o.kernel) throw Error("zoo: maxpool2d: the kernel is larger than the padded input");
  ModelBuilder b("maxpool2d", 17);
  b.input("input", DType::Float32, Shape{o.batch, channels, size, size});
  b.node("MaxPool", {"input"}, {"output"}, "pool")
      .attr("kernel_shape", std::vector<int64_t>{o.kernel, o.kernel})
      .attr("strides", std::vector<int64_t>{o.stride, o.stride})
      .attr("pads", std::vector<int64_t>{o.padding, o.padding, o.padding, o.padding});
  b.output("output", DType::Float32, Shape{o.batch, channels, out_size, out_size});
  return b;
}

}  // namespace kiln
