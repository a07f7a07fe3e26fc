// Linear quantization as tensor expressions: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear,
// MatMulInteger and QLinearMatMul. The frontend reference rounds intermediate results to the dtypes
// ONNX's reference computes in; since a stage's result is rounded to its dtype, each such rounding
// point is its own stage here (a quantized output can flip when a .5 boundary moves).
#include "scheduler/te/narrow_codes.h"
#include "scheduler/te/ops/dot4_form.h"
#include "scheduler/te/ops/linalg_common.h"

namespace kiln::te {
namespace {

// Clamp `v` (a whole number or NaN, float64 or float32) to the integer dtype's range, then convert; in
// float64 every bound (int32's included) is exact, in float32 those of types up to 16 bits. A narrow
// integer becomes its code (narrow_codes.h).
Expr saturate_to(DType t, const Expr& v) {
  Expr lo = float_imm(linalg::integer_min(t), v->dtype), hi = float_imm(linalg::integer_max(t), v->dtype);
  const Expr clamped = min(max(v, lo), hi);
  return is_narrow_int(t) ? in_range_to_narrow_int(cast(DType::Int32, clamped), t) : cast(t, clamped);
}

// ---- Where a scale / zero point element of QuantizeLinear / DequantizeLinear sits: per tensor, per
// axis (1-D of the axis' extent) or blocked (x's rank, axis extent divided into blocks).

std::vector<Expr> quant_param_index(const LowerContext& c, const Shape& param, const std::vector<Expr>& idx) {
  if (num_elements(param) == 1) return zero_indices(param.size());
  const Node& n = c.node();
  const int64_t rank = c.rank(0);
  const int64_t axis = normalize_axis(n, n.opset >= 13 ? n.attr_int("axis", 1) : 1, rank);
  const int64_t block = n.opset >= 21 ? n.attr_int("block_size", 0) : 0;
  if (block <= 0) return {idx[static_cast<size_t>(axis)]};
  std::vector<Expr> r = idx;
  r[static_cast<size_t>(axis)] = floordiv(idx[static_cast<size_t>(axis)], int_imm(block));
  return r;
}

Expr quant_param(const LowerContext& c, size_t input, const std::vector<Expr>& idx) {
  return at(c.input(input), quant_param_index(c, c.shape(input), idx));
}

// An element of x or a zero point as a number of `t`: narrow types' codes decoded (narrow_codes.h),
// others converted.
Expr quant_value(const LowerContext& c, size_t input, const Expr& e, DType t) {
  const DType g = c.graph_dtype(input);
  if (is_narrow_float(g)) return cast(t, narrow_to_float(e, g));
  if (is_narrow_int(g)) return cast(t, narrow_to_int(e, g));
  return cast(t, e);
}

// The dtype the reference divides x by the scale in: `precision` (opset 23) or numpy's promotion.
DType division_dtype(const LowerContext& c) {
  const Node& n = c.node();
  int64_t precision = n.opset >= 23 ? n.attr_int("precision", 0) : 0;
  if (precision != 0) return linalg::dtype_attr(n, "precision", precision);
  return linalg::promoted_float_dtype(c.dtype(0), c.dtype(1));
}

// ---- QuantizeLinear: y = saturate(round(x / scale) + zero_point); a NaN quotient gives zero_point.

void lower_quantize_linear(LowerContext& c) {
  const DType out = c.out_dtype(0), div = division_dtype(c), dc = compute_dtype(div);
  const Shape& shape = c.shape(0);
  const bool has_zp = c.has_input(2);
  TensorRef q = compute(c.name("scaled"), "broadcast", div, shape, [&](const std::vector<Expr>& i) {
    // Both operands are rounded to the division dtype first, as the reference does.
    Expr x = cast(dc, cast(div, at(c.input(0), i)));
    Expr s = cast(dc, cast(div, quant_param(c, 1, i)));
    return cast(div, x / s);
  });
  const DType og = c.out_graph_dtype(0);
  const bool saturate = c.node().attr_int("saturate", 1) != 0;
  // A float32 quotient rounds, adds its zero point and saturates in float32 when the result and the
  // zero point have at most 16 bits: round(q) is exact, so is round(q) + zero_point below 2^24 in
  // magnitude, and beyond it both saturate to the same bound. float64 is a library call per operation
  // on a Cortex-M (the keyword spotter's input quantization: 390 instructions an element, 3% of the
  // model) and half the vector width on x86.
  const bool short_ints = (is_narrow_int(og) || (is_integer(og) && dtype_size(og) <= 2)) &&
                          (!has_zp || is_narrow_int(c.graph_dtype(2)) || dtype_size(c.graph_dtype(2)) <= 2);
  const DType rt = div == DType::Float32 && short_ints ? DType::Float32 : DType::Float64;
  c.set_output(0, compute(c.name(), "broadcast", out, shape, [&](const std::vector<Expr>& i) {
                 Expr qv = cast(rt, at(q, i));
                 Expr zero = has_zp ? quant_value(c, 2, quant_param(c, 2, i), rt) : float_imm(0, rt);
                 // A narrow float is not rounded to an integer: the conversion rounds to the format.
                 if (is_narrow_float(og)) return float_to_narrow(cast(DType::Float32, qv + zero), og, saturate, PowerRounding::Up);
                 Expr v = select(unary(ExprOp::IsNaN, qv), zero, unary(ExprOp::Round, qv) + zero);
                 return saturate_to(og, v);
               }));
}

// ---- DequantizeLinear: y = (x - zero_point) * scale

void lower_dequantize_linear(LowerContext& c) {
  const DType out = c.out_dtype(0), x_dtype = c.dtype(0);
  const Shape& shape = c.shape(0);
  const bool has_zp = c.has_input(2);
  // The reference subtracts in float32 (float64 when int32 meets int32) and multiplies in the
  // promotion of that with the scale's dtype.
  const DType diff = x_dtype == DType::Int32 && has_zp ? DType::Float64 : DType::Float32;
  const DType mul = linalg::promoted_float_dtype(diff, c.dtype(1));
  auto product = [&](const std::vector<Expr>& i) {
    Expr dx = quant_value(c, 0, at(c.input(0), i), DType::Float32);  // rounds int32 to float32 like the reference
    if (has_zp) dx = cast(diff, dx) - quant_value(c, 2, quant_param(c, 2, i), diff);
    return cast(mul, dx) * cast(mul, quant_param(c, 1, i));
  };
  // Rounding to `mul` before `out` matters only when `mul` is narrower than double.
  if (mul == out || mul == DType::Float64) {
    c.set_output(0, compute(c.name(), "broadcast", out, shape,
                            [&](const std::vector<Expr>& i) { return cast(out, product(i)); }));
    return;
  }
  TensorRef y = compute(c.name("product"), "broadcast", mul, shape, product);
  c.set_output(0, cast_stage(c.name(), y, out));
}

// ---- DynamicQuantizeLinear: uint8 quantization whose scale and zero point come from x's range
// (which always includes 0). Every float32 rounding point of the reference is a stage boundary.

void lower_dynamic_quantize_linear(LowerContext& c) {
  const DType t = c.dtype(0), f32 = DType::Float32;
  const TensorRef& x = c.input(0);
  const Shape& shape = x->shape;
  const std::vector<int64_t> all(shape.begin(), shape.end());
  auto flat = [&](const std::vector<Expr>&, const std::vector<Expr>& r) {
    // The reference's std::min/std::max skip NaN; as the range starts at [0, 0], reading NaN as 0 is
    // the same thing.
    Expr v = cast(f32, at(x, r));
    return select(unary(ExprOp::IsNaN, v), float_imm(0, f32), v);
  };
  TensorRef hi = reduce(c.name("max"), "reduction", f32, {}, Reducer::Max, all, flat, float_imm(0, f32));
  TensorRef lo = reduce(c.name("min"), "reduction", f32, {}, Reducer::Min, all, flat, float_imm(0, f32));
  TensorRef range = compute(c.name("range"), "elementwise", f32, {},
                            [&](const std::vector<Expr>&) { return at(hi, {}) - at(lo, {}); });
  TensorRef scale = compute(c.name("scale"), "elementwise", f32, {}, [&](const std::vector<Expr>&) {
    Expr rv = at(range, {});
    return select(eq(rv, float_imm(0, f32)), float_imm(1, f32), rv / float_imm(255, f32));
  });
  TensorRef lo_scaled = compute(c.name("lo_scaled"), "elementwise", f32, {},
                                [&](const std::vector<Expr>&) { return at(lo, {}) / at(scale, {}); });
  auto clamp_u8 = [&](const Expr& v) { return min(max(v, float_imm(0, f32)), float_imm(255, f32)); };
  TensorRef zero = compute(c.name("zero_point"), "elementwise", DType::UInt8, {}, [&](const std::vector<Expr>&) {
    return cast(DType::UInt8, unary(ExprOp::Round, clamp_u8(-at(lo_scaled, {}))));
  });
  TensorRef scaled = compute(c.name("scaled"), "broadcast", f32, shape,
                             [&](const std::vector<Expr>& i) { return cast(f32, at(x, i)) / at(scale, {}); });
  c.set_output(0, compute(c.name(), "broadcast", DType::UInt8, shape, [&](const std::vector<Expr>& i) {
                 return cast(DType::UInt8,
                             clamp_u8(unary(ExprOp::Round, at(scaled, i)) + cast(f32, at(zero, {}))));
               }));
  c.set_output(1, cast_stage(c.name("scale_out"), scale, t));
  c.set_output(2, zero);
}

// ---- MatMulInteger and QLinearMatMul

// The zero point of an operand element: per tensor, per row of A (a 1-D [M] parameter of a matrix A),
// or broadcast against the operand as it is.
Expr operand_zero_point(const TensorRef& zp, const Shape& operand, const std::vector<Expr>& idx, bool is_a) {
  const Shape& zs = zp->shape;
  if (num_elements(zs) == 1) return at(zp, zero_indices(zs.size()));
  if (is_a && operand.size() >= 2 && zs.size() == 1) return at(zp, {idx[operand.size() - 2]});
  return at(zp, broadcast_indices(idx, operand, zs));
}

// Whether input `zp` is absent or one value (per tensor), or, with `per_column`, a 1-D [n].
bool is_simple_zero_point(const LowerContext& c, size_t zp, bool per_column, int64_t n) {
  if (!c.has_input(zp)) return true;
  const Shape& s = c.shape(zp);
  return num_elements(s) == 1 || (per_column && s.size() == 1 && s[0] == n);
}

// sum_k a * b of an 8-bit A and a constant int8 B [k, n], four k at a time (kiln's *Dot4 ops,
// frontend/layout/int8_dot_layout.h): A's rows packed into int32 quads of bytes, shifted as the op's
// Dot4Form says (dot4_form.h: A + 128 for int8 into vpdpbusd's unsigned operand, A - 128 for uint8
// into sdot's signed one; k past the end reads 0), B packed at compile time into [ceil(k / 4), n]
// quads (zero past the end), summed as Dot4 terms: one vpdpbusd per 16 columns with VNNI. The
// result is sum_k (a + shift) * b; `shift` says what was added.
TensorRef dot4_matmul_sum(const LowerContext& c, const std::string& name, size_t a_in, const Tensor& b,
                          const MatMulShape& s, int64_t* shift) {
  const linalg::MatMulDims& d = s.d;
  const DType i32 = DType::Int32;
  const int64_t quads = (d.k + 3) / 4;
  const Dot4Form form = dot4_form(c.node(), c.dtype(a_in));
  *shift = form.shift;
  const TensorRef& a = c.input(a_in);
  Shape aq_shape = a->shape;
  aq_shape.back() = quads;
  const TensorRef aq = compute(name + ".quads", "pad", i32, aq_shape, [&](const std::vector<Expr>& idx) {
    return byte_quad([&](int64_t j) {
      std::vector<Expr> ai = idx;
      ai.back() = idx.back() * 4 + j;
      Expr byte = form.byte(cast(i32, at(a, ai)) + int_imm(*shift, i32));
      return d.k % 4 != 0 ? select(ai.back() < int_imm(d.k), byte, int_imm(0, i32)) : byte;
    });
  });
  std::vector<int64_t> packed(static_cast<size_t>(quads * d.n));
  for (int64_t q = 0; q < quads; ++q)
    for (int64_t col = 0; col < d.n; ++col)
      packed[static_cast<size_t>(q * d.n + col)] =
          byte_quad_bits([&](int64_t j) { return 4 * q + j < d.k ? b.get_int((4 * q + j) * d.n + col) : 0; });
  const TensorRef bq = placeholder(c.name("b_quads"), i32, {quads, d.n},
                                   std::make_shared<const Tensor>(Tensor::from_ints(i32, {quads, d.n}, packed)));
  return reduce(name, "matmul", i32, d.out, Reducer::Sum, {quads}, [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
    std::vector<Expr> batch(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(d.batch.size()));
    std::vector<Expr> ai = broadcast_indices(batch, d.batch, d.a_batch);
    if (!s.a_vector) ai.push_back(s.row(idx));
    ai.push_back(r[0]);
    return form.dot(at(aq, ai), at(bq, {r[0], s.col(idx)}));
  });
}

// sum_k (a - za) * (b - zb) with B a constant matrix [k, n]: expanded as
// sum_k a * b - zb[n] * sum_k a[m, k] - za * sum_k b[k, n] + k * za * zb[n], so no zero point is
// subtracted in the inner loop. B's column sums are constants; A's row sums are a reduction of their
// own, needed only when zb is not all zero (uint8 weights). int32 arithmetic wraps, so the integer is
// the same. nullptr when the operands do not have that form.
TensorRef hoisted_integer_matmul(const LowerContext& c, const std::string& name, size_t a_in, size_t a_zp, size_t b_in,
                                 size_t b_zp, const MatMulShape& s, bool dot4) {
  const Tensor* b = c.constant(b_in);
  const linalg::MatMulDims& d = s.d;
  if (!b || b->rank() != 2 || s.b_vector || (c.has_input(b_zp) && !c.constant(b_zp)) ||
      !is_simple_zero_point(c, a_zp, false, 0) || !is_simple_zero_point(c, b_zp, true, d.n))
    return nullptr;
  const DType i32 = DType::Int32;
  std::vector<int64_t> col_sums(static_cast<size_t>(d.n), 0);
  for (int64_t i = 0; i < b->size(); ++i) col_sums[static_cast<size_t>(i % d.n)] += b->get_int(i);
  const TensorRef cols = placeholder(c.name("b_column_sums"), i32, {d.n},
                                     std::make_shared<const Tensor>(Tensor::from_ints(i32, {d.n}, col_sums)));
  bool zb_zero = true;
  if (c.has_input(b_zp))
    for (int64_t v : c.constant(b_zp)->to_ints()) zb_zero &= v == 0;
  auto value = [&](size_t in) { return [&c, in, i32](const std::vector<Expr>& i) { return cast(i32, at(c.input(in), i)); }; };
  // With dot4, the sum is of (a + shift) * b: shift * sum_k b comes off with za's term below.
  int64_t shift = 0;
  const bool packed = dot4 && b->dtype() == DType::Int8;
  const TensorRef sum = packed ? dot4_matmul_sum(c, name + ".sum", a_in, *b, s, &shift)
                               : matmul_accumulate(name + ".sum", i32, s, value(a_in), value(b_in));
  // A's row sums over k, indexed by the output's leading axes (all but n).
  TensorRef rows;
  const Shape row_shape(d.out.begin(), d.out.end() - 1);
  if (!zb_zero)
    rows = reduce(name + ".row_sums", "reduction", i32, row_shape, Reducer::Sum, {d.k},
                  [&](const std::vector<Expr>& idx, const std::vector<Expr>& r) {
                    std::vector<Expr> batch(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(d.batch.size()));
                    std::vector<Expr> ai = broadcast_indices(batch, d.batch, d.a_batch);
                    if (!s.a_vector) ai.push_back(idx.back());
                    ai.push_back(r[0]);
                    return cast(i32, at(c.input(a_in), ai));
                  });
  return compute(name, "broadcast", i32, d.out, [&](const std::vector<Expr>& idx) {
    const Expr col = s.col(idx);
    const Expr za = c.has_input(a_zp) ? cast(i32, at(c.input(a_zp), zero_indices(c.shape(a_zp).size()))) : int_imm(0, i32);
    Expr zb = int_imm(0, i32);
    if (c.has_input(b_zp))
      zb = cast(i32, at(c.input(b_zp), num_elements(c.shape(b_zp)) == 1 ? zero_indices(c.shape(b_zp).size()) : std::vector<Expr>{col}));
    // The row sums are read before the sum: the DAG then orders their reduction first, and the
    // default schedule can finish the sum's reduction with this stage inside its loop nest.
    Expr v = at(sum, idx);
    if (!zb_zero) {
      const std::vector<Expr> ri(idx.begin(), idx.end() - 1);
      v = (za * zb * int_imm(d.k, i32) - zb * at(rows, ri)) + v;
    }
    return v - (za + int_imm(shift, i32)) * at(cols, {col});
  });
}

// sum_k (a - a_zero_point) * (b - b_zero_point) in int32, the accumulator ONNX specifies.
// `dot4`: the *Dot4 form of the op (a constant int8 B, the layout stage checked); zero points the
// hoisted form does not take keep the plain sum.
TensorRef integer_matmul(const LowerContext& c, const std::string& name, size_t a_in, size_t a_zp, size_t b_in,
                         size_t b_zp, const MatMulShape& s, bool dot4) {
  if (TensorRef t = hoisted_integer_matmul(c, name, a_in, a_zp, b_in, b_zp, s, dot4)) return t;
  const DType acc = DType::Int32;
  auto shifted = [&](size_t in, size_t zp, bool is_a) {
    return [&c, in, zp, is_a, acc](const std::vector<Expr>& i) {
      Expr v = cast(acc, at(c.input(in), i));
      return c.has_input(zp) ? v - cast(acc, operand_zero_point(c.input(zp), c.shape(in), i, is_a)) : v;
    };
  };
  return matmul_accumulate(name, acc, s, shifted(a_in, a_zp, true), shifted(b_in, b_zp, false));
}

void lower_matmul_integer(LowerContext& c, bool dot4) {
  MatMulShape s = matmul_shape(c.node(), c.shape(0), c.shape(1));
  c.set_output(0, integer_matmul(c, c.name(), 0, 2, 1, 3, s, dot4));
}

// QLinearMatMul inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
// y = saturate(round(acc * (a_scale * b_scale / y_scale) + y_zero_point)), the multiplier rounded to
// the scales' dtype after each step as the reference does.
void lower_qlinear_matmul(LowerContext& c, bool dot4) {
  MatMulShape s = matmul_shape(c.node(), c.shape(0), c.shape(3));
  const DType out = c.out_dtype(0), f64 = DType::Float64;
  TensorRef acc = integer_matmul(c, c.name("acc"), 0, 2, 3, 5, s, dot4);

  const bool per_row = num_elements(c.shape(1)) > 1, per_col = num_elements(c.shape(4)) > 1;
  const DType sd = linalg::promoted_float_dtype(linalg::promoted_float_dtype(c.dtype(1), c.dtype(4)), c.dtype(6));
  const DType sc = compute_dtype(sd);
  const Shape mult_shape{per_row ? s.d.m : 1, per_col ? s.d.n : 1};
  auto scale_at = [&](size_t in, const Expr& i) {
    const Shape& sh = c.shape(in);
    return cast(sc, at(c.input(in), num_elements(sh) == 1 ? zero_indices(sh.size()) : std::vector<Expr>{i}));
  };
  TensorRef ab = compute(c.name("ab_scale"), "broadcast", sd, mult_shape, [&](const std::vector<Expr>& i) {
    return cast(sd, scale_at(1, i[0]) * scale_at(4, i[1]));
  });
  TensorRef mult = compute(c.name("multiplier"), "broadcast", sd, mult_shape, [&](const std::vector<Expr>& i) {
    return cast(sd, cast(sc, at(ab, i)) / scale_at(6, int_imm(0)));
  });
  c.set_output(0, compute(c.name(), "broadcast", out, s.d.out, [&](const std::vector<Expr>& i) {
                 Expr m = at(mult, {per_row ? s.row(i) : int_imm(0), per_col ? s.col(i) : int_imm(0)});
                 Expr zero = c.has_input(7) ? at(c.input(7), zero_indices(c.shape(7).size())) : Expr();
                 if (sd == DType::Float32) {
                   // float32 scales: requantized in float32 as ONNX Runtime does (linalg_internal.h).
                   const DType f32 = DType::Float32;  // the bounds of an 8-bit output are exact in it
                   // The multiplier first: its stages then come before the accumulator's reduction
                   // in the DAG, which lets the default schedule finish the reduction in its own
                   // loop nest (see lower_qlinear_conv).
                   Expr v = unary(ExprOp::Round, m * cast(f32, at(acc, i)));
                   if (zero) v = v + cast(f32, zero);
                   return cast(out, min(max(v, float_imm(linalg::integer_min(out), f32)), float_imm(linalg::integer_max(out), f32)));
                 }
                 Expr v = cast(f64, m) * cast(f64, at(acc, i));
                 if (zero) v = v + cast(f64, zero);
                 return saturate_to(out, unary(ExprOp::Round, v));
               }));
}

}  // namespace

void register_linalg_quant_lowerings(LoweringRegistry& r) {
  r.add({"QuantizeLinear", "", lower_quantize_linear});
  r.add({"DequantizeLinear", "", lower_dequantize_linear});
  r.add({"DynamicQuantizeLinear", "", lower_dynamic_quantize_linear});
  r.add({"MatMulInteger", "", [](LowerContext& c) { lower_matmul_integer(c, false); }});
  r.add({"QLinearMatMul", "", [](LowerContext& c) { lower_qlinear_matmul(c, false); }});
  r.add({"MatMulIntegerDot4", "kiln", [](LowerContext& c) { lower_matmul_integer(c, true); }});
  r.add({"QLinearMatMulDot4", "kiln", [](LowerContext& c) { lower_qlinear_matmul(c, true); }});
}

}  // namespace kiln::te
