/// \file The narrow element types: 8-bit floats (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0), the 4-bit
/// float e2m1, and 4- and 2-bit integers. They exist to store weights and activations compactly; kiln
/// never computes in them. A value is held as its code (the bit pattern, zero-extended), converted to a
/// wide type to be computed with and back to a code to be stored. Types narrower than a byte are
/// packed as ONNX packs them: element i in bits [w * (i % (8 / w)), ...) of byte i * w / 8, the first
/// element in the low bits. kiln writes the unused high bits of a last, partial byte as zero and
/// ignores them when reading.
#pragma once
#include <cstdint>

#include "frontend/ir/dtype.h"
#include "frontend/ir/graph.h"

namespace kiln {

bool is_narrow(DType t);        // any type of this file
bool is_narrow_float(DType t);  // float8 (all five) and float4e2m1
bool is_narrow_int(DType t);    // int4, uint4, int2, uint2
int dtype_bits(DType t);        // bits per element of any supported dtype (bool: 8); 0 if unsupported
/// Bytes that `count` elements occupy, packed (a last partial byte counts whole).
int64_t storage_bytes(DType t, int64_t count);

/// A small float format with a sign bit: exponent and mantissa widths, bias, and how it spells what
/// it cannot hold. "fnuz" formats have one NaN (0x80, where negative zero would be) and no negative
/// zero; e4m3fn has NaN at all-ones and no infinity; e5m2 is IEEE-like; e2m1 has neither NaN nor
/// infinity (e8m0, an exponent alone, is not one of these).
struct Minifloat {
  int exp_bits, man_bits, bias;
  bool fnuz, ieee;    // ieee: the all-ones exponent is infinity (mantissa 0) or NaN
  uint32_t max_code;  // the largest finite magnitude's code
  uint32_t nan_code;  // the NaN a NaN input becomes, without its sign; fnuz: the whole code
  uint32_t sign_bit;
  bool has_nan() const { return exp_bits > 2; }
};
/// The format of a float8 type other than e8m0, or of float4e2m1; nullptr for other dtypes.
const Minifloat* minifloat_of(DType t);

/// How Cast rounds to float8e8m0, which has no mantissa: to the power of two at or above (the default),
/// at or below, or nearest (ties to the larger).
enum class PowerRounding { Up, Down, Nearest };
/// How a Cast (or CastLike) node converts to the narrow floats: its `saturate` (opset 19+, default 1)
/// and `round_mode` (opset 24+, "up" (default), "down" or "nearest"; only float8e8m0 uses it). Throws
/// Error naming the node for another round_mode.
struct NarrowCastRule {
  bool saturate = true;
  PowerRounding power = PowerRounding::Up;
};
NarrowCastRule narrow_cast_rule(const Node& n);

/// The value a code stands for: exact (every narrow value is a float32), NaN for the NaN codes, signed
/// integers sign-extended.
double narrow_decode(DType t, uint32_t code);

/// The code of `v` in a narrow float type, as Cast defines it (and ONNX's reference computes it): v is
/// first rounded to float32, then to nearest even in the target. `saturate` clamps values beyond the
/// largest finite one, infinities included, to it; otherwise they become infinity (e5m2) or NaN.
/// float4e2m1 always saturates. float8e8m0 rounds to a power of two by `power`.
uint32_t narrow_float_encode(DType t, double v, bool saturate, PowerRounding power = PowerRounding::Up);

/// The code of an integer value in a narrow integer type: its low bits (two's complement wrapping, the
/// rule for integer-to-integer casts).
uint32_t narrow_int_wrap(DType t, int64_t v);
/// Cast of a float to a narrow integer type as ONNX's reference does it: truncated toward zero, then
/// wrapped; NaN, infinities and values beyond int32 become 0.
uint32_t narrow_int_from_float(DType t, double v);
/// The smallest and largest value of a narrow integer type.
int64_t narrow_int_min(DType t);
int64_t narrow_int_max(DType t);

/// The code at element i of packed storage, and its replacement.
uint32_t load_code(const void* data, DType t, int64_t i);
void store_code(void* data, DType t, int64_t i, uint32_t code);

}  // namespace kiln
