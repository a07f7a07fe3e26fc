// Linear quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, and the integer matmuls
// MatMulInteger and QLinearMatMul. Intermediate roundings follow the dtypes ONNX's reference computes
// in, because quantized outputs are integers: one rounding step done in a wider type can move a value
// across a .5 boundary and change the result.
#include <algorithm>
#include <cmath>

#include "frontend/ir/narrow_types.h"
#include "frontend/ops/linalg_internal.h"

namespace kiln::linalg {
namespace {

bool is_quantized_int(DType t) {
  return t == DType::UInt8 || t == DType::Int8 || t == DType::UInt16 || t == DType::Int16 || t == DType::Int32 ||
         is_narrow_int(t);
}

// The types QuantizeLinear writes and DequantizeLinear reads: the integers above and the narrow
// floats but float8e8m0 (which the ops do not take).
bool is_quantized(DType t) { return is_quantized_int(t) || (is_narrow_float(t) && t != DType::Float8E8M0); }

double saturate(double v, DType t) { return std::clamp(v, integer_min(t), integer_max(t)); }

// How a scale or zero-point tensor lines up with x. x is viewed as [outer, axis_len, inner]; a per-axis
// parameter has axis_len elements, a blocked one has shape [outer, blocks, inner] flattened.
struct QuantLayout {
  enum class Kind { PerTensor, PerAxis, Blocked } kind = Kind::PerTensor;
  int64_t axis_len = 1, inner = 1, block_size = 1, blocks = 1;

  int64_t param_index(int64_t i) const {
    if (kind == Kind::PerTensor) return 0;
    int64_t d = (i / inner) % axis_len;
    if (kind == Kind::PerAxis) return d;
    int64_t o = i / (inner * axis_len);
    return (o * blocks + d / block_size) * inner + i % inner;
  }
};

QuantLayout quant_layout(const Node& node, const Shape& x, const Shape& scale) {
  QuantLayout q;
  if (num_elements(scale) == 1) return q;
  int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = normalize_axis(node, node.opset >= 13 ? node.attr_int("axis", 1) : 1, rank);
  int64_t block_size = node.opset >= 21 ? node.attr_int("block_size", 0) : 0;
  if (block_size < 0) throw Error(node.label() + ": block_size must be >= 0, got " + std::to_string(block_size));
  q.axis_len = x[axis];
  for (int64_t i = axis + 1; i < rank; ++i) q.inner *= x[i];
  if (block_size == 0) {
    if (scale.size() != 1 || scale[0] != x[axis])
      throw Error(node.label() + ": per-axis scale of shape " + shape_str(scale) + " does not match axis " +
                  std::to_string(axis) + " of input shape " + shape_str(x));
    q.kind = QuantLayout::Kind::PerAxis;
    return q;
  }
  q.kind = QuantLayout::Kind::Blocked;
  q.block_size = block_size;
  q.blocks = (x[axis] + block_size - 1) / block_size;
  bool ok = static_cast<int64_t>(scale.size()) == rank;
  for (int64_t i = 0; ok && i < rank; ++i) ok = scale[i] == (i == axis ? q.blocks : x[i]);
  if (!ok)
    throw Error(node.label() + ": blocked scale of shape " + shape_str(scale) + " does not match input shape " +
                shape_str(x) + " with block_size " + std::to_string(block_size) + " on axis " + std::to_string(axis));
  return q;
}

void check_zero_point_shape(const InferContext& c, size_t scale_input, size_t zp_input) {
  if (c.has_input(zp_input) && c.shape(zp_input) != c.shape(scale_input) &&
      !(num_elements(c.shape(zp_input)) == 1 && num_elements(c.shape(scale_input)) == 1))
    c.fail("zero point shape " + shape_str(c.shape(zp_input)) + " differs from scale shape " +
           shape_str(c.shape(scale_input)));
}

// ---- QuantizeLinear: y = saturate(round(x / scale) + zero_point)

DType quantize_output_dtype(const InferContext& c) {
  const Node& n = c.node();
  int64_t attr = n.opset >= 21 ? n.attr_int("output_dtype", 0) : 0;
  if (c.has_input(2)) {
    DType zp = c.dtype(2);
    if (attr != 0 && dtype_from_int(static_cast<int32_t>(attr)) != zp)
      c.fail("output_dtype " + dtype_name(dtype_from_int(static_cast<int32_t>(attr))) + " differs from zero point dtype " +
             dtype_name(zp));
    return zp;
  }
  return attr != 0 ? dtype_attr(n, "output_dtype", attr) : DType::UInt8;
}

// The dtype the reference divides x by the scale in.
DType division_dtype(const Node& n, DType x, DType scale) {
  int64_t precision = n.opset >= 23 ? n.attr_int("precision", 0) : 0;
  if (precision != 0) {
    DType p = dtype_attr(n, "precision", precision);
    if (!is_float(p)) throw Error(n.label() + ": precision must name a float dtype, got " + dtype_name(p));
    return p;
  }
  return promoted_float_dtype(x, scale);
}

OpDef quantize_linear_op() {
  OpDef d;
  d.op_type = "QuantizeLinear";
  d.infer = [](InferContext& c) {
    c.require_input(0, "x");
    c.require_input(1, "y_scale");
    if (!is_float(c.dtype(0)) && c.dtype(0) != DType::Int32)
      c.unsupported("input dtype " + dtype_name(c.dtype(0)) + " is not supported");
    if (!is_float(c.dtype(1))) c.fail("y_scale must be a float tensor, got " + dtype_name(c.dtype(1)));
    DType out = quantize_output_dtype(c);
    if (!is_quantized(out)) c.unsupported("quantizing to " + dtype_name(out) + " is not supported");
    check_zero_point_shape(c, 1, 2);
    quant_layout(c.node(), c.shape(0), c.shape(1));
    division_dtype(c.node(), c.dtype(0), c.dtype(1));
    c.set_output(0, out, c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Node& n = c.node();
    const Tensor& x = c.input(0);
    const Tensor& scale = c.input(1);
    const Tensor* zp = c.has_input(2) ? &c.input(2) : nullptr;
    DType out_dtype = zp ? zp->dtype() : DType::UInt8;
    if (!zp && n.opset >= 21 && n.attr_int("output_dtype", 0) != 0)
      out_dtype = dtype_attr(n, "output_dtype", n.attr_int("output_dtype", 0));
    QuantLayout layout = quant_layout(n, x.shape(), scale.shape());
    DType div = division_dtype(n, x.dtype(), scale.dtype());
    const bool saturate_float = n.attr_int("saturate", 1) != 0;
    Tensor y(out_dtype, x.shape());
    for (int64_t i = 0; i < x.size(); ++i) {
      int64_t p = layout.param_index(i);
      double q = round_to_dtype(round_to_dtype(x.get_double(i), div) / round_to_dtype(scale.get_double(p), div), div);
      double zero = zp ? zp->get_double(p) : 0.0;
      if (is_narrow_float(out_dtype)) {  // no rounding to an integer: the cast rounds to the format
        y.set_code(i, narrow_float_encode(out_dtype, round_to_dtype(q + zero, DType::Float32), saturate_float));
        continue;
      }
      double v = std::isnan(q) ? zero : round_half_to_even(q) + zero;
      y.set_int(i, static_cast<int64_t>(saturate(v, out_dtype)));
    }
    c.set_output(0, std::move(y));
  };
  d.flops = [](const NodeShapes& s) { return 3.0 * num_elements(s.out.at(0)); };  // divide, round, add
  d.takes_narrow_types = true;
  return d;
}

// ---- DequantizeLinear: y = (x - zero_point) * scale

OpDef dequantize_linear_op() {
  OpDef d;
  d.op_type = "DequantizeLinear";
  d.infer = [](InferContext& c) {
    c.require_input(0, "x");
    c.require_input(1, "x_scale");
    DType x = c.dtype(0);
    if (!is_quantized(x)) c.unsupported("dequantizing " + dtype_name(x) + " is not supported");
    if (c.has_input(2) && c.dtype(2) != x)
      c.fail("zero point dtype " + dtype_name(c.dtype(2)) + " differs from input dtype " + dtype_name(x));
    if (!is_float(c.dtype(1))) c.fail("x_scale must be a float tensor, got " + dtype_name(c.dtype(1)));
    DType out = c.dtype(1);
    int64_t attr = c.opset() >= 23 ? c.node().attr_int("output_dtype", 0) : 0;
    if (attr != 0) out = dtype_attr(c.node(), "output_dtype", attr);
    if (!is_float(out)) c.fail("output_dtype must be a float dtype, got " + dtype_name(out));
    check_zero_point_shape(c, 1, 2);
    quant_layout(c.node(), c.shape(0), c.shape(1));
    c.set_output(0, out, c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Node& n = c.node();
    const Tensor& x = c.input(0);
    const Tensor& scale = c.input(1);
    const Tensor* zp = c.has_input(2) ? &c.input(2) : nullptr;
    DType out = scale.dtype();
    int64_t attr = n.opset >= 23 ? n.attr_int("output_dtype", 0) : 0;
    if (attr != 0) out = dtype_attr(n, "output_dtype", attr);
    QuantLayout layout = quant_layout(n, x.shape(), scale.shape());
    // The reference subtracts in float32 (float64 when int32 meets int32) and multiplies in the
    // promotion of that with the scale's dtype.
    DType diff_dtype = x.dtype() == DType::Int32 && zp ? DType::Float64 : DType::Float32;
    DType mul_dtype = promoted_float_dtype(diff_dtype, scale.dtype());
    Tensor y(out, x.shape());
    for (int64_t i = 0; i < x.size(); ++i) {
      int64_t p = layout.param_index(i);
      double dx = round_to_dtype(x.get_double(i), DType::Float32);
      if (zp) dx = round_to_dtype(dx - zp->get_double(p), diff_dtype);
      y.set_double(i, round_to_dtype(dx * scale.get_double(p), mul_dtype));
    }
    c.set_output(0, std::move(y));
  };
  d.flops = [](const NodeShapes& s) { return 2.0 * num_elements(s.out.at(0)); };  // subtract, multiply
  d.takes_narrow_types = true;
  return d;
}

// ---- DynamicQuantizeLinear: uint8 quantization with scale and zero point taken from x's range

OpDef dynamic_quantize_linear_op() {
  OpDef d;
  d.op_type = "DynamicQuantizeLinear";
  d.infer = [](InferContext& c) {
    c.require_input(0, "x");
    if (!is_float(c.dtype(0))) c.unsupported("input dtype " + dtype_name(c.dtype(0)) + " is not supported");
    c.set_output(0, DType::UInt8, c.shape(0));
    c.set_output(1, c.dtype(0), {});
    c.set_output(2, DType::UInt8, {});
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    auto f32 = [](double v) { return round_to_dtype(v, DType::Float32); };
    double hi = 0.0, lo = 0.0;  // the range always includes 0
    for (int64_t i = 0; i < x.size(); ++i) {
      double v = x.get_double(i);
      hi = std::max(hi, v);
      lo = std::min(lo, v);
    }
    double scale = hi == lo ? 1.0 : f32(f32(hi - lo) / 255.0);
    double zero = round_half_to_even(std::clamp(f32(0.0 - f32(lo / scale)), 0.0, 255.0));
    Tensor y(DType::UInt8, x.shape());
    for (int64_t i = 0; i < x.size(); ++i)
      y.set_int(i, static_cast<int64_t>(std::clamp(round_half_to_even(f32(x.get_double(i) / scale)) + zero, 0.0, 255.0)));
    c.set_output(0, std::move(y));
    c.set_output(1, Tensor::scalar_double(x.dtype(), scale));
    c.set_output(2, Tensor::scalar_int(DType::UInt8, static_cast<int64_t>(zero)));
  };
  // min/max scan (2), then divide, round, add per element.
  d.flops = [](const NodeShapes& s) { return 5.0 * num_elements(s.in.at(0)); };
  return d;
}

// ---- MatMulInteger and QLinearMatMul

// The shape a zero point (or scale) of a matmul operand broadcasts from: a 1-D parameter of an operand
// of rank >= 2 is per row of A ([M] -> [M, 1]) or per column of B ([N], already aligned); other shapes
// must broadcast to the operand's shape as they are.
Shape operand_param_shape(const Node& node, const Shape& operand, const Shape& param, bool is_a, const char* what) {
  if (num_elements(param) == 1) return {};
  Shape s = param;
  if (is_a && operand.size() >= 2 && param.size() == 1) s = {param[0], 1};
  auto b = broadcast(operand, s);
  if (!b || *b != operand || s.size() > operand.size())
    throw Error(node.label() + ": " + what + " of shape " + shape_str(param) + " does not fit operand of shape " +
                shape_str(operand));
  return s;
}

// x - zero_point over x's elements, as int64.
std::vector<int64_t> shifted_operand(const Node& node, const Tensor& x, const Tensor* zp, bool is_a) {
  std::vector<int64_t> v = x.to_ints();
  if (!zp) return v;
  Shape zs = operand_param_shape(node, x.shape(), zp->shape(), is_a, "zero point");
  std::vector<int64_t> map = broadcast_index_map(x.shape(), zs);
  for (size_t i = 0; i < v.size(); ++i) v[i] -= zp->get_int(map[i]);
  return v;
}

void check_operand_param(const InferContext& c, size_t operand, size_t param, bool is_a, const char* what) {
  if (!c.has_input(param)) return;
  operand_param_shape(c.node(), c.shape(operand), c.shape(param), is_a, what);
}

bool is_8bit(DType t) { return t == DType::UInt8 || t == DType::Int8; }

// kiln.MatMulIntegerDot4 and kiln.QLinearMatMulDot4 (frontend/layout/int8_dot_layout.h) are the same
// ops, whose lowerings reduce four k at a time: the same integers.
OpDef matmul_integer_op(const char* op_type = "MatMulInteger", const char* domain = "") {
  OpDef d;
  d.op_type = op_type;
  d.domain = domain;
  d.infer = [](InferContext& c) {
    c.require_input(0, "A");
    c.require_input(1, "B");
    if (!is_8bit(c.dtype(0)) || !is_8bit(c.dtype(1)))
      c.unsupported("operands must be int8 or uint8, got " + dtype_name(c.dtype(0)) + " and " + dtype_name(c.dtype(1)));
    for (size_t zp = 2; zp <= 3; ++zp)
      if (c.has_input(zp) && c.dtype(zp) != c.dtype(zp - 2))
        c.fail("zero point " + std::to_string(zp) + " has dtype " + dtype_name(c.dtype(zp)) + ", expected " +
               dtype_name(c.dtype(zp - 2)));
    check_operand_param(c, 0, 2, true, "a_zero_point");
    check_operand_param(c, 1, 3, false, "b_zero_point");
    c.set_output(0, DType::Int32, matmul_dims(c.node(), c.shape(0), c.shape(1)).out);
  };
  d.eval = [](EvalContext& c) {
    const Tensor& a = c.input(0);
    const Tensor& b = c.input(1);
    MatMulDims dims = matmul_dims(c.node(), a.shape(), b.shape());
    auto av = shifted_operand(c.node(), a, c.has_input(2) ? &c.input(2) : nullptr, true);
    auto bv = shifted_operand(c.node(), b, c.has_input(3) ? &c.input(3) : nullptr, false);
    c.set_output(0, Tensor::from_ints(DType::Int32, dims.out, batched_matmul(dims, av, bv)));
  };
  d.flops = [](const NodeShapes& s) {
    MatMulDims m = matmul_dims(s.node, s.in.at(0), s.in.at(1));
    return 2.0 * static_cast<double>(m.batch_count() * m.m * m.k * m.n);
  };
  return d;
}

// QLinearMatMul inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
// Scales: a per tensor or per row ([M]), b per tensor or per column ([N]), y per tensor.
int64_t scale_extent(const InferContext* ic, const Node& node, const Shape& s, int64_t per, const char* what) {
  int64_t n = num_elements(s);
  if (n == 1) return 1;
  if (s.size() == 1 && s[0] == per) return per;
  std::string msg = std::string(what) + " of shape " + shape_str(s) + " is neither per-tensor nor of extent " +
                    std::to_string(per);
  if (ic) ic->unsupported(msg);
  throw Unsupported(node.label() + ": " + msg);
}

OpDef qlinear_matmul_op(const char* op_type = "QLinearMatMul", const char* domain = "") {
  OpDef d;
  d.op_type = op_type;
  d.domain = domain;
  d.infer = [](InferContext& c) {
    const char* names[] = {"a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"};
    for (size_t i : {0, 1, 3, 4, 6}) c.require_input(i, names[i]);
    if (!is_8bit(c.dtype(0)) || !is_8bit(c.dtype(3)))
      c.unsupported("operands must be int8 or uint8, got " + dtype_name(c.dtype(0)) + " and " + dtype_name(c.dtype(3)));
    for (size_t i : {1, 4, 6})
      if (!is_float(c.dtype(i))) c.fail(std::string(names[i]) + " must be a float tensor");
    if (c.has_input(2) && c.dtype(2) != c.dtype(0)) c.fail("a_zero_point's dtype differs from a's");
    if (c.has_input(5) && c.dtype(5) != c.dtype(3)) c.fail("b_zero_point's dtype differs from b's");
    MatMulDims m = matmul_dims(c.node(), c.shape(0), c.shape(3));
    scale_extent(&c, c.node(), c.shape(1), m.m, "a_scale");
    scale_extent(&c, c.node(), c.shape(4), m.n, "b_scale");
    scale_extent(&c, c.node(), c.shape(6), 1, "y_scale");
    check_operand_param(c, 0, 2, true, "a_zero_point");
    check_operand_param(c, 3, 5, false, "b_zero_point");
    DType out = c.dtype(0);
    if (c.has_input(7)) {
      out = c.dtype(7);
      if (!is_8bit(out)) c.unsupported("y_zero_point dtype " + dtype_name(out) + " is not supported");
      if (num_elements(c.shape(7)) != 1) c.unsupported("y_zero_point must be per-tensor");
    }
    c.set_output(0, out, m.out);
  };
  d.eval = [](EvalContext& c) {
    const Node& n = c.node();
    const Tensor& a = c.input(0);
    const Tensor& b = c.input(3);
    const Tensor& a_scale = c.input(1);
    const Tensor& b_scale = c.input(4);
    const Tensor& y_scale = c.input(6);
    MatMulDims dims = matmul_dims(n, a.shape(), b.shape());
    auto av = shifted_operand(n, a, c.has_input(2) ? &c.input(2) : nullptr, true);
    auto bv = shifted_operand(n, b, c.has_input(5) ? &c.input(5) : nullptr, false);
    std::vector<int64_t> acc = batched_matmul(dims, av, bv);
    bool per_row = scale_extent(nullptr, n, a_scale.shape(), dims.m, "a_scale") > 1;
    bool per_col = scale_extent(nullptr, n, b_scale.shape(), dims.n, "b_scale") > 1;
    DType scale_dtype = promoted_float_dtype(promoted_float_dtype(a_scale.dtype(), b_scale.dtype()), y_scale.dtype());
    DType out = c.has_input(7) ? c.input(7).dtype() : a.dtype();
    double y_zero = c.has_input(7) ? c.input(7).get_double(0) : 0.0;
    Tensor y(out, dims.out);
    for (int64_t i = 0; i < y.size(); ++i) {
      int64_t col = i % dims.n, row = (i / dims.n) % dims.m;
      // Combined multiplier a_scale * b_scale / y_scale, rounded as the reference does in the scales' dtype.
      double mult = round_to_dtype(a_scale.get_double(per_row ? row : 0) * b_scale.get_double(per_col ? col : 0),
                                   scale_dtype);
      mult = round_to_dtype(mult / y_scale.get_double(0), scale_dtype);
      // float32 scales: applied in float32, as ONNX Runtime does (linalg_internal.h).
      double v = scale_dtype == DType::Float32 ? requantize_float32(acc[i], static_cast<float>(mult), y_zero)
                                               : round_half_to_even(static_cast<double>(acc[i]) * mult + y_zero);
      y.set_int(i, static_cast<int64_t>(saturate(v, out)));
    }
    c.set_output(0, std::move(y));
  };
  d.flops = [](const NodeShapes& s) {
    MatMulDims m = matmul_dims(s.node, s.in.at(0), s.in.at(3));
    double outs = static_cast<double>(m.batch_count() * m.m * m.n);
    return 2.0 * outs * static_cast<double>(m.k) + 3.0 * outs;  // requantize: scale, add, round
  };
  return d;
}

}  // namespace

void register_quant_ops(OpRegistry& r) {
  r.add(quantize_linear_op());
  r.add(dequantize_linear_op());
  r.add(dynamic_quantize_linear_op());
  r.add(matmul_integer_op());
  r.add(qlinear_matmul_op());
  r.add(matmul_integer_op("MatMulIntegerDot4", "kiln"));
  r.add(qlinear_matmul_op("QLinearMatMulDot4", "kiln"));
}

}  // namespace kiln::linalg
