/// \file Element types of tensors.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln {

/// Element types, numbered as ONNX's TensorProto.DataType so import is a cast. kiln computes with the
/// numeric ones; the others exist so errors can name them.
enum class DType : int32_t {
  Undefined = 0,
  Float32 = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Float64 = 11,
  UInt32 = 12,
  UInt64 = 13,
  Complex64 = 14,
  Complex128 = 15,
  BFloat16 = 16,
  // The narrow types (narrow_types.h): stored, converted, never computed in.
  Float8E4M3FN = 17,
  Float8E4M3FNUZ = 18,
  Float8E5M2 = 19,
  Float8E5M2FNUZ = 20,
  UInt4 = 21,
  Int4 = 22,
  Float4E2M1 = 23,
  Float8E8M0 = 24,
  UInt2 = 25,
  Int2 = 26,
};

/// True for the dtypes kiln stores: those it computes with (float16/32/64, bfloat16, signed/unsigned
/// 8-64 bit ints, bool) and the narrow ones it converts from and to (narrow_types.h).
bool is_supported(DType t);
bool is_float(DType t);    // float16, bfloat16, float32, float64
bool is_integer(DType t);  // signed or unsigned ints (not bool)
bool is_signed(DType t);
size_t dtype_size(DType t);  // bytes per element; 0 for unsupported and for types narrower than a byte
std::string dtype_name(DType t);  // "float32", "int64", ...; "dtype(23)" for unknown numbers
DType dtype_from_int(int32_t v);  // any number; unknown ones keep their value for messages

/// Rounds a double to the nearest value representable in a float dtype (float16 via IEEE
/// round-to-nearest-even); identity for float64.
double round_to_dtype(double v, DType t);
/// Wraps an integer to the range of an integer dtype (two's complement), maps bool to 0/1.
int64_t wrap_to_dtype(int64_t v, DType t);

uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
uint16_t float_to_bfloat16(float f);
float bfloat16_to_float(uint16_t h);

}  // namespace kiln
