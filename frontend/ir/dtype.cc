#include "frontend/ir/dtype.h"

#include "frontend/ir/narrow_types.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace kiln {

bool is_float(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::Float64 || t == DType::BFloat16;
}

bool is_integer(DType t) {
  switch (t) {
    case DType::UInt8: case DType::Int8: case DType::UInt16: case DType::Int16:
    case DType::Int32: case DType::Int64: case DType::UInt32: case DType::UInt64:
      return true;
    default:
      return false;
  }
}

bool is_signed(DType t) {
  return t == DType::Int8 || t == DType::Int16 || t == DType::Int32 || t == DType::Int64 || is_float(t);
}

bool is_supported(DType t) { return is_float(t) || is_integer(t) || t == DType::Bool || is_narrow(t); }

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Bool: case DType::UInt8: case DType::Int8: return 1;
    case DType::UInt16: case DType::Int16: case DType::Float16: case DType::BFloat16: return 2;
    case DType::Int32: case DType::UInt32: case DType::Float32: return 4;
    case DType::Int64: case DType::UInt64: case DType::Float64: return 8;
    case DType::Float8E4M3FN: case DType::Float8E4M3FNUZ: case DType::Float8E5M2: case DType::Float8E5M2FNUZ:
    case DType::Float8E8M0: return 1;
    default: return 0;
  }
}

std::string dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::UInt16: return "uint16";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::String: return "string";
    case DType::Bool: return "bool";
    case DType::Float16: return "float16";
    case DType::Float64: return "float64";
    case DType::UInt32: return "uint32";
    case DType::UInt64: return "uint64";
    case DType::Complex64: return "complex64";
    case DType::Complex128: return "complex128";
    case DType::BFloat16: return "bfloat16";
    case DType::Undefined: return "undefined";
    case DType::Float8E4M3FN: return "float8e4m3fn";
    case DType::Float8E4M3FNUZ: return "float8e4m3fnuz";
    case DType::Float8E5M2: return "float8e5m2";
    case DType::Float8E5M2FNUZ: return "float8e5m2fnuz";
    case DType::UInt4: return "uint4";
    case DType::Int4: return "int4";
    case DType::Float4E2M1: return "float4e2m1";
    case DType::Float8E8M0: return "float8e8m0";
    case DType::UInt2: return "uint2";
    case DType::Int2: return "int2";
  }
  return "dtype(" + std::to_string(static_cast<int32_t>(t)) + ")";
}

DType dtype_from_int(int32_t v) { return static_cast<DType>(v); }

uint16_t float_to_half(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t exp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00u | (mant ? 0x200u : 0u));
  int e = static_cast<int>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    int shift = 14 - e;
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (half & 1u))) ++half;  // may carry into the exponent: correct
  return static_cast<uint16_t>(half);
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      int e = -1;
      do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
      x = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    x = sign | 0x7f800000u | (mant << 13);
  } else {
    x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(x);
}

uint16_t float_to_bfloat16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40u);
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

float bfloat16_to_float(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

double round_to_dtype(double v, DType t) {
  switch (t) {
    case DType::Float32: return static_cast<double>(static_cast<float>(v));
    case DType::Float16: return half_to_float(float_to_half(static_cast<float>(v)));
    case DType::BFloat16: return bfloat16_to_float(float_to_bfloat16(static_cast<float>(v)));
    default: return v;
  }
}

int64_t wrap_to_dtype(int64_t v, DType t) {
  switch (t) {
    case DType::Bool: return v != 0;
    case DType::UInt8: return static_cast<uint8_t>(v);
    case DType::Int8: return static_cast<int8_t>(v);
    case DType::UInt16: return static_cast<uint16_t>(v);
    case DType::Int16: return static_cast<int16_t>(v);
    case DType::UInt32: return static_cast<uint32_t>(v);
    case DType::Int32: return static_cast<int32_t>(v);
    default: return v;
  }
}

}  // namespace kiln
