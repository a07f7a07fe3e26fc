#include "scheduler/te/narrow_codes.h"

#include <cmath>
#include <cstring>

#include "frontend/ir/error.h"

namespace kiln::te {
namespace {

Expr i32(int64_t v) { return int_imm(v, DType::Int32); }
Expr f32(double v) { return float_imm(v, DType::Float32); }
Expr band(const Expr& a, int64_t m) { return binary(ExprOp::BitAnd, a, i32(m)); }
Expr shr(const Expr& a, int64_t n) { return binary(ExprOp::Shr, a, i32(n)); }
Expr shl(const Expr& a, int64_t n) { return binary(ExprOp::Shl, a, i32(n)); }
Expr bor(const Expr& a, const Expr& b) { return binary(ExprOp::BitOr, a, b); }
Expr code_of(const Expr& v) { return cast(DType::UInt8, v); }

int64_t per_byte(DType t) { return 8 / dtype_bits(t); }

// The row-major flat position of `idx` in shape `s`, and back.
Expr flat_index(const std::vector<Expr>& idx, const Shape& s) {
  Expr f = int_imm(0);
  const std::vector<int64_t> st = strides_of(s);
  for (size_t k = 0; k < idx.size(); ++k) f = f + idx[k] * st[k];
  return f;
}

std::vector<Expr> index_of_flat(const Expr& f, const Shape& s) {
  std::vector<Expr> idx;
  const std::vector<int64_t> st = strides_of(s);
  for (size_t k = 0; k < s.size(); ++k) idx.push_back(floormod(floordiv(f, int_imm(st[k])), int_imm(s[k])));
  return idx;
}

// Normal numbers are rebuilt as float32 bits (exponent rebiased, mantissa moved up); subnormals are
// the mantissa times the smallest step, both exact.
Expr minifloat_to_float(const Expr& c, const Minifloat& f) {
  const Expr mag = band(c, f.sign_bit - 1);
  const Expr exp = shr(mag, f.man_bits), man = band(mag, (1 << f.man_bits) - 1);
  const Expr bits = bor(shl(exp + i32(127 - f.bias), 23), shl(man, 23 - f.man_bits));
  const Expr normal = reinterpret(DType::Float32, bits);
  const Expr subnormal = cast(DType::Float32, man) * f32(std::ldexp(1.0, 1 - f.bias - f.man_bits));
  Expr v = select(eq(exp, i32(0)), subnormal, normal);
  const Expr nan = f32(NAN);
  if (f.ieee) v = select(eq(exp, i32((1 << f.exp_bits) - 1)), select(eq(man, i32(0)), f32(INFINITY), nan), v);
  else if (!f.fnuz && f.has_nan()) v = select(eq(mag, i32(f.nan_code)), nan, v);
  v = select(eq(band(c, f.sign_bit), i32(0)), v, -v);
  if (f.fnuz) v = select(eq(c, i32(f.nan_code)), nan, v);
  return v;
}

// 2^(c - 127) as float32 bits; c = 0 is float32's subnormal 2^-127.
Expr e8m0_to_float(const Expr& c) {
  const Expr v = select(eq(c, i32(0)), reinterpret(DType::Float32, i32(0x400000)), reinterpret(DType::Float32, shl(c, 23)));
  return select(eq(c, i32(255)), f32(NAN), v);
}

// As narrow_types.cc's encode_minifloat, on float32's bits in int32 lanes: round to nearest even by
// adding half less one plus the kept lsb, subnormals scaled to an integer and rounded there.
Expr float_to_minifloat(const Expr& x, const Minifloat& f, bool saturate) {
  const Expr bits = reinterpret(DType::Int32, x);
  const Expr abs = band(bits, 0x7fffffff);
  const Expr sign = select(bits < i32(0), i32(f.sign_bit), i32(0));
  const int shift = 23 - f.man_bits;
  const Expr rounded = shr(abs + i32((1 << (shift - 1)) - 1) + band(shr(abs, shift), 1), shift);
  const Expr normal = rounded - i32(static_cast<int64_t>(127 - f.bias) << f.man_bits);
  const Expr scaled = unary(ExprOp::Abs, x) * f32(std::ldexp(1.0, f.bias - 1 + f.man_bits));
  const Expr subnormal = cast(DType::Int32, unary(ExprOp::Round, min(scaled, f32(1 << (f.man_bits + 1)))));
  const Expr mag = select(shr(abs, 23) >= i32(128 - f.bias), normal, subnormal);
  const bool signed_nan = !f.fnuz && f.has_nan();
  const Expr nan = signed_nan ? bor(i32(f.nan_code), sign) : i32(f.nan_code);
  Expr overflow;
  if (saturate || !f.has_nan()) overflow = bor(i32(f.max_code), sign);
  else if (f.ieee) overflow = bor(i32(f.max_code + 1), sign);
  else overflow = nan;
  Expr finite = bor(mag, sign);
  if (f.fnuz) finite = select(eq(mag, i32(0)), i32(0), finite);
  // abs >= infinity's bits: infinity overflows, and abs past it is NaN (checked first).
  const Expr code = select(abs > i32(0x7f800000), nan,
                           select(abs >= i32(0x7f800000) || mag > i32(f.max_code), overflow, finite));
  return code_of(code);
}

Expr float_to_e8m0(const Expr& x, bool saturate, PowerRounding power) {
  const Expr abs = band(reinterpret(DType::Int32, x), 0x7fffffff);
  const Expr exp = shr(abs, 23), man = band(abs, 0x7fffff);
  Expr up = const_of(DType::Bool, 0);
  auto ne = [](const Expr& a, const Expr& b) { return binary(ExprOp::Ne, a, b); };
  if (power == PowerRounding::Up) up = ne(man, i32(0));
  if (power == PowerRounding::Nearest)
    up = ne(band(man, 0x400000), i32(0)) && (ne(exp, i32(0)) || ne(band(man, 0x3fffff), i32(0)));
  const Expr raised = select(eq(exp, i32(254)), i32(saturate ? 254 : 255), exp + i32(1));
  return code_of(select(abs >= i32(0x7f800000), i32(255), select(up, raised, exp)));
}

}  // namespace

DType code_dtype(DType t) { return is_narrow(t) ? DType::UInt8 : t; }

StoredForm stored_form(DType t, const Shape& s) {
  if (!is_narrow(t)) return {t, s};
  if (dtype_bits(t) == 8) return {DType::UInt8, s};
  return {DType::UInt8, {storage_bytes(t, num_elements(s))}};
}

Tensor stored_tensor(const Tensor& t) {
  if (!is_narrow(t.dtype())) return t;
  const StoredForm f = stored_form(t.dtype(), t.shape());
  Tensor out(f.dtype, f.shape);
  if (out.byte_size()) std::memcpy(out.data(), t.data(), out.byte_size());
  return out;
}

Tensor tensor_from_stored(const Tensor& stored, DType t, const Shape& s) {
  if (!is_narrow(t)) return stored;
  Tensor out(t, s);
  if (stored.byte_size() != out.byte_size())
    throw Error("a stored " + dtype_name(t) + " tensor of shape " + shape_str(s) + " needs " +
                std::to_string(out.byte_size()) + " bytes, got " + std::to_string(stored.byte_size()));
  if (out.byte_size()) std::memcpy(out.data(), stored.data(), out.byte_size());
  return out;
}

StoredInput stored_input(const std::string& name, DType t, const Shape& s, std::shared_ptr<const Tensor> constant) {
  const StoredForm f = stored_form(t, s);
  if (constant && is_narrow(t)) constant = std::make_shared<const Tensor>(stored_tensor(*constant));
  const TensorRef p = placeholder(name, f.dtype, f.shape, std::move(constant));
  if (!is_narrow(t) || dtype_bits(t) == 8) return {p, p};
  const int64_t bits = dtype_bits(t), per = per_byte(t);
  const TensorRef codes = compute(name + ".codes", "injective", DType::UInt8, s, [&](const std::vector<Expr>& idx) {
    const Expr f = flat_index(idx, s);
    const Expr byte = cast(DType::Int32, at(p, {floordiv(f, int_imm(per))}));
    const Expr offset = cast(DType::Int32, floormod(f, int_imm(per)) * bits);
    return code_of(band(binary(ExprOp::Shr, byte, offset), (1 << bits) - 1));
  });
  return {p, codes};
}

TensorRef stored_output(const std::string& name, const TensorRef& codes, DType t) {
  if (!is_narrow(t) || dtype_bits(t) == 8) return codes;
  const int64_t bits = dtype_bits(t), per = per_byte(t), n = num_elements(codes->shape);
  const StoredForm f = stored_form(t, codes->shape);
  return compute(name + ".packed", "injective", DType::UInt8, f.shape, [&](const std::vector<Expr>& idx) {
    Expr byte = i32(0);
    for (int64_t k = 0; k < per; ++k) {
      const Expr flat = idx[0] * per + k;
      const Expr code = band(cast(DType::Int32, at(codes, index_of_flat(flat, codes->shape))), (1 << bits) - 1);
      byte = bor(byte, select(flat < int_imm(n), shl(code, k * bits), i32(0)));
    }
    return code_of(byte);
  });
}

bool is_storage_stage(const Stage& s) {
  auto ends_with = [&](const std::string& suffix) {
    return s.name.size() > suffix.size() && s.name.compare(s.name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return s.tag == "injective" && s.dtype == DType::UInt8 && (ends_with(".codes") || ends_with(".packed"));
}

Expr narrow_to_float(const Expr& code, DType t) {
  const Expr c = cast(DType::Int32, code);
  if (const Minifloat* f = minifloat_of(t)) return minifloat_to_float(c, *f);
  if (t == DType::Float8E8M0) return e8m0_to_float(c);
  return cast(DType::Float32, narrow_to_int(code, t));
}

Expr narrow_to_int(const Expr& code, DType t) {
  const Expr c = cast(DType::Int32, code);
  if (t == DType::UInt4 || t == DType::UInt2) return c;
  const int64_t sign = int64_t{1} << (dtype_bits(t) - 1);
  return binary(ExprOp::BitXor, c, i32(sign)) - i32(sign);
}

Expr float_to_narrow(const Expr& f32v, DType t, bool saturate, PowerRounding power) {
  if (const Minifloat* f = minifloat_of(t)) return float_to_minifloat(f32v, *f, saturate);
  return float_to_e8m0(f32v, saturate, power);
}

Expr to_narrow_int(const Expr& v, DType t) {
  const int64_t mask = (int64_t{1} << dtype_bits(t)) - 1;
  if (!is_float(v->dtype)) return code_of(band(cast(DType::Int32, v), mask));
  const Expr x = cast(DType::Float64, v);
  const Expr in_int32 = unary(ExprOp::Abs, x) < float_imm(2147483648.0, DType::Float64);
  return code_of(select(in_int32, band(cast(DType::Int32, x), mask), i32(0)));
}

Expr in_range_to_narrow_int(const Expr& v, DType t) {
  return code_of(band(cast(DType::Int32, v), (int64_t{1} << dtype_bits(t)) - 1));
}

}  // namespace kiln::te
