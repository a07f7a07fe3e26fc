/// \file Helpers shared by the elementwise family's files (elementwise_*.cc); not for other families.
#pragma once
#include <cstdint>
#include <string>

#include "frontend/ops/axes_and_broadcast.h"

namespace kiln::elementwise {

/// The dtypes an elementwise op accepts. kiln accepts the union over all opset versions of an op (type
/// lists only ever grew), so a newer dtype in an older opset is not rejected.
enum class Accepts {
  Floats,               // float16, bfloat16, float32, float64
  FloatsAndSignedInts,  // ... plus int8..int64 (Neg, Relu)
  Numeric,              // floats and all integer dtypes
  NumericAndBool,       // ... plus bool (Equal)
  Integers,             // int8..int64, uint8..uint64 (Bitwise*)
  UnsignedInts,         // uint8..uint64 (BitShift)
  Bool,                 // bool only (Not, And, Or, Xor)
};

inline bool is_unsigned_int(DType t) { return is_integer(t) && !is_signed(t); }

inline bool accepts(Accepts a, DType t) {
  switch (a) {
    case Accepts::Floats: return is_float(t);
    case Accepts::FloatsAndSignedInts: return is_float(t) || (is_integer(t) && is_signed(t));
    case Accepts::Numeric: return is_float(t) || is_integer(t);
    case Accepts::NumericAndBool: return is_float(t) || is_integer(t) || t == DType::Bool;
    case Accepts::Integers: return is_integer(t);
    case Accepts::UnsignedInts: return is_unsigned_int(t);
    case Accepts::Bool: return t == DType::Bool;
  }
  return false;
}

inline const char* accepts_name(Accepts a) {
  switch (a) {
    case Accepts::Floats: return "float dtypes";
    case Accepts::FloatsAndSignedInts: return "float and signed integer dtypes";
    case Accepts::Numeric: return "numeric dtypes";
    case Accepts::NumericAndBool: return "numeric dtypes and bool";
    case Accepts::Integers: return "integer dtypes";
    case Accepts::UnsignedInts: return "unsigned integer dtypes";
    case Accepts::Bool: return "bool";
  }
  return "?";
}

/// Reports an input dtype the op does not take as unsupported, naming what it does take.
inline void require_accepted(const InferContext& c, size_t input, Accepts a) {
  if (!accepts(a, c.dtype(input)))
    c.unsupported("input " + std::to_string(input) + " has dtype " + dtype_name(c.dtype(input)) + "; " +
                  c.node().op_type + " takes " + accepts_name(a));
}

/// Integer results are computed in 64-bit unsigned arithmetic, which wraps like two's complement
/// without signed-overflow UB; Tensor::set_int then wraps them to the output dtype.
inline int64_t wrapping_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t wrapping_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
inline int64_t wrapping_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

void register_unary_ops(OpRegistry& r);     // math, activations, Not, BitwiseNot, IsNaN/IsInf
void register_binary_ops(OpRegistry& r);    // arithmetic, comparison, logic, bitwise, Pow, Mod, Min/Max/Sum/Mean
void register_special_ops(OpRegistry& r);   // Cast, CastLike, Clip, Where, PRelu

}  // namespace kiln::elementwise
