/// \file Which four-byte dot product a *Dot4 op's lowering sums (frontend/layout/int8_dot_layout.h),
/// and how it packs its 8-bit input for it.
///
/// Why two: x86's vpdpbusd multiplies unsigned bytes by signed ones, so an int8 input is packed
/// as x + 128; AArch64's sdot multiplies signed by signed, so a uint8 input is packed as x - 128.
/// Either way the weights are signed bytes and the shift comes off with the zero point's constant
/// (shift * sum of the weights), so the integers are the same. The layout stage says which one the
/// target has in the op's `dot` attribute ("u8s8", the default, or "s8s8"). A Cortex-M's SMLAD takes
/// either (UXTB16 or SXTB16 widens the input's bytes), and gets u8s8.
#pragma once
#include <cstdint>

#include "frontend/ir/graph.h"
#include "scheduler/te/expr.h"

namespace kiln::te {

struct Dot4Form {
  bool signed_input = false;  ///< Dot4S8S8 (sdot) rather than Dot4U8S8 (vpdpbusd)
  int64_t shift = 0;          ///< what packing adds to each input byte

  /// Input value `v` (an int32 of the 8-bit input, shifted) as byte j of a quad: [0, 255].
  Expr byte(const Expr& v) const { return signed_input ? binary(ExprOp::BitAnd, v, int_imm(255, DType::Int32)) : v; }
  Expr dot(const Expr& input_quad, const Expr& weight_quad) const {
    return signed_input ? dot4_s8s8(input_quad, weight_quad) : dot4_u8s8(input_quad, weight_quad);
  }
};

/// The form of `n` (a kiln *Dot4 op) for an input of type `input` (Int8 or UInt8).
inline Dot4Form dot4_form(const Node& n, DType input) {
  const bool s8s8 = n.attr_string("dot", "u8s8") == "s8s8";
  if (s8s8) return {true, input == DType::UInt8 ? -128 : 0};
  return {false, input == DType::Int8 ? 128 : 0};
}

}  // namespace kiln::te
