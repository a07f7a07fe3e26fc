#include "frontend/ir/narrow_types.h"

#include <bit>
#include <cmath>
#include <cstring>

#include "frontend/ir/error.h"

namespace kiln {

const Minifloat* minifloat_of(DType t) {
  // e5m2 writes NaN as 0x7e (a quiet NaN with the mantissa's high bit) and e2m1, having none, as -0:
  // what ONNX's reference (ml_dtypes) writes and its node tests hold.
  static constexpr Minifloat e4m3fn{4, 3, 7, false, false, 0x7e, 0x7f, 0x80};
  static constexpr Minifloat e4m3fnuz{4, 3, 8, true, false, 0x7f, 0x80, 0x80};
  static constexpr Minifloat e5m2{5, 2, 15, false, true, 0x7b, 0x7e, 0x80};
  static constexpr Minifloat e5m2fnuz{5, 2, 16, true, false, 0x7f, 0x80, 0x80};
  static constexpr Minifloat e2m1{2, 1, 1, false, false, 0x7, 0x8, 0x8};
  switch (t) {
    case DType::Float8E4M3FN: return &e4m3fn;
    case DType::Float8E4M3FNUZ: return &e4m3fnuz;
    case DType::Float8E5M2: return &e5m2;
    case DType::Float8E5M2FNUZ: return &e5m2fnuz;
    case DType::Float4E2M1: return &e2m1;
    default: return nullptr;
  }
}

namespace {

double decode_minifloat(const Minifloat& f, uint32_t code) {
  if (f.fnuz && code == f.nan_code) return std::nan("");
  const bool negative = (code & f.sign_bit) != 0;
  const uint32_t mag = code & (f.sign_bit - 1);
  const uint32_t exp = mag >> f.man_bits, man = mag & ((1u << f.man_bits) - 1);
  double v;
  if (f.ieee && exp == (1u << f.exp_bits) - 1) v = man ? std::nan("") : INFINITY;
  else if (!f.ieee && !f.fnuz && f.has_nan() && mag == f.nan_code) v = std::nan("");
  else if (exp == 0) v = std::ldexp(static_cast<double>(man), 1 - f.bias - f.man_bits);
  else v = std::ldexp(1.0 + std::ldexp(static_cast<double>(man), -f.man_bits), static_cast<int>(exp) - f.bias);
  return negative ? -v : v;
}

// Round to nearest even on float32's bits: the exponent carries when the mantissa rounds over, which
// is the right answer, and the subnormal range is scaled to an integer and rounded there. Saturation
// clamps before rounding, infinities included (e2m1 always saturates); without it a value past the
// largest becomes infinity (e5m2) or NaN.
uint32_t encode_minifloat(const Minifloat& f, float x, bool saturate) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t sign = bits >> 31 ? f.sign_bit : 0;
  const uint32_t abs = bits & 0x7fffffffu;
  const bool has_nan = f.has_nan();
  if (abs > 0x7f800000u) return f.fnuz || !has_nan ? f.nan_code : f.nan_code | sign;
  auto overflow = [&]() -> uint32_t {
    if (saturate || !has_nan) return f.max_code | sign;
    if (f.ieee) return (f.max_code + 1) | sign;  // infinity
    return f.fnuz ? f.nan_code : f.nan_code | sign;
  };
  if (abs == 0x7f800000u) return overflow();
  uint32_t mag;
  const int exp = static_cast<int>(abs >> 23) - 127;
  if (exp >= 1 - f.bias) {
    const int shift = 23 - f.man_bits;
    if (exp > (1 << f.exp_bits)) return overflow();  // far out of range: keep the shift below from wrapping
    const uint32_t rounded = (abs + (1u << (shift - 1)) - 1 + ((abs >> shift) & 1)) >> shift;
    mag = rounded - (static_cast<uint32_t>(127 - f.bias) << f.man_bits);
  } else {
    mag = static_cast<uint32_t>(std::nearbyint(std::ldexp(static_cast<double>(std::fabs(x)), f.bias - 1 + f.man_bits)));
  }
  if (mag > f.max_code) return overflow();
  if (mag == 0 && f.fnuz) return 0;
  return mag | sign;
}

// e8m0: 2^(code - 127), 0xff NaN, no sign and no zero.
double decode_e8m0(uint32_t code) {
  if (code == 0xff) return std::nan("");
  return std::ldexp(1.0, static_cast<int>(code) - 127);
}

// On float32's fields, the sign ignored (negatives are undefined): the exponent field, plus one when
// rounding up past it. Zero stays 0x00 in every mode; NaN and infinity are 0xff even when saturating.
uint32_t encode_e8m0(float x, bool saturate, PowerRounding power) {
  const uint32_t abs = std::bit_cast<uint32_t>(x) & 0x7fffffffu;
  if (abs >= 0x7f800000u) return 0xff;
  uint32_t exp = abs >> 23;
  const uint32_t man = abs & 0x7fffffu;
  bool up = false;
  if (power == PowerRounding::Up) up = man != 0;
  // Nearest: ties (1.5 x 2^e) go up; a float32 subnormal's field is below its value's exponent, so
  // there the half-way bit alone is not more than half.
  if (power == PowerRounding::Nearest) up = (man & 0x400000u) != 0 && (exp != 0 || (man & 0x3fffffu) != 0);
  if (up) {
    if (exp == 0xfe) return saturate ? 0xfe : 0xff;
    ++exp;
  }
  return exp;
}

}  // namespace

bool is_narrow(DType t) { return is_narrow_float(t) || is_narrow_int(t); }

bool is_narrow_float(DType t) { return minifloat_of(t) != nullptr || t == DType::Float8E8M0; }

bool is_narrow_int(DType t) {
  return t == DType::Int4 || t == DType::UInt4 || t == DType::Int2 || t == DType::UInt2;
}

int dtype_bits(DType t) {
  switch (t) {
    case DType::Int4: case DType::UInt4: case DType::Float4E2M1: return 4;
    case DType::Int2: case DType::UInt2: return 2;
    default: return static_cast<int>(8 * dtype_size(t));
  }
}

int64_t storage_bytes(DType t, int64_t count) { return (count * dtype_bits(t) + 7) / 8; }

NarrowCastRule narrow_cast_rule(const Node& n) {
  NarrowCastRule r;
  r.saturate = n.attr_int("saturate", 1) != 0;
  const std::string mode = n.attr_string("round_mode", "up");
  if (mode == "up") r.power = PowerRounding::Up;
  else if (mode == "down") r.power = PowerRounding::Down;
  else if (mode == "nearest") r.power = PowerRounding::Nearest;
  else throw Error(n.label() + ": round_mode must be up, down or nearest, got '" + mode + "'");
  return r;
}

double narrow_decode(DType t, uint32_t code) {
  if (const Minifloat* f = minifloat_of(t)) return decode_minifloat(*f, code);
  if (t == DType::Float8E8M0) return decode_e8m0(code);
  const int bits = dtype_bits(t);
  if (t == DType::Int4 || t == DType::Int2) {
    const uint32_t sign = 1u << (bits - 1);
    return static_cast<double>(static_cast<int32_t>(code ^ sign) - static_cast<int32_t>(sign));
  }
  return static_cast<double>(code);
}

uint32_t narrow_float_encode(DType t, double v, bool saturate, PowerRounding power) {
  const float x = static_cast<float>(v);
  if (const Minifloat* f = minifloat_of(t)) return encode_minifloat(*f, x, saturate);
  return encode_e8m0(x, saturate, power);
}

uint32_t narrow_int_from_float(DType t, double v) {
  if (!(std::fabs(v) < 2147483648.0)) return 0;  // NaN, infinities and beyond int32
  return narrow_int_wrap(t, static_cast<int64_t>(v));
}

uint32_t narrow_int_wrap(DType t, int64_t v) {
  return static_cast<uint32_t>(static_cast<uint64_t>(v) & ((1u << dtype_bits(t)) - 1));
}

int64_t narrow_int_min(DType t) { return t == DType::Int4 ? -8 : t == DType::Int2 ? -2 : 0; }

int64_t narrow_int_max(DType t) {
  switch (t) {
    case DType::Int4: return 7;
    case DType::UInt4: return 15;
    case DType::Int2: return 1;
    default: return 3;  // uint2
  }
}

uint32_t load_code(const void* data, DType t, int64_t i) {
  const auto* p = static_cast<const uint8_t*>(data);
  const int bits = dtype_bits(t);
  if (bits >= 8) return p[i];
  const int per_byte = 8 / bits;
  return (p[i / per_byte] >> (bits * (i % per_byte))) & ((1u << bits) - 1);
}

void store_code(void* data, DType t, int64_t i, uint32_t code) {
  auto* p = static_cast<uint8_t*>(data);
  const int bits = dtype_bits(t);
  if (bits >= 8) {
    p[i] = static_cast<uint8_t>(code);
    return;
  }
  const int per_byte = 8 / bits, shift = bits * static_cast<int>(i % per_byte);
  const uint32_t mask = ((1u << bits) - 1) << shift;
  uint8_t& byte = p[i / per_byte];
  byte = static_cast<uint8_t>((byte & ~mask) | ((code << shift) & mask));
}

}  // namespace kiln
