/// \file The float32 requantization of an int8 kernel in integer instructions on 32-bit Arm.
///
/// Why: kiln's int8 convolutions and matmuls end every output with the requantization ONNX Runtime
/// computes (scheduler/te/ops: nn_conv_lowering.cc, linalg_quant_lowering.cc):
///     cast(T, min(max(round(y) + float(zero_point), lo), hi))
/// with y the accumulator times a float multiplier. Emitted as written, a Cortex-M4 runs about 46
/// instructions per output for it: the rounding without a rounding instruction, each float clamp a
/// compare, a flag move and a conditional move, and a range test before the conversion. That was
/// 0.7 instructions per multiply-add of DS-CNN's pointwise convs and more than half of its depthwise
/// convs' instructions. A VFP's VCVTR converts to int32 rounding in the current mode (to nearest even:
/// kiln's code never changes it) and saturating, QADD adds the zero point saturating and SSAT/USAT
/// clamp: nine instructions with the NaN test.
///
/// The result is the same integer for every y: with R = round(y), R + zero_point is exact in float32
/// while |R| < 2^24 (a zero point of at most 16 bits) and then equals the saturated integer sum;
/// beyond that both clamp to the same bound. A NaN y gives NaN through kiln's NaN-propagating min and
/// max and converts to 0 (ONNX's saturating conversion), which the NaN test keeps.
#pragma once
#include <cstdint>
#include <optional>

#include <llvm/IR/IRBuilder.h>

#include "scheduler/te/expr.h"

namespace kiln::llvm_backend {

/// The parts of a requantizing cast: the integer result is clamp(round(scaled) + zero_point, lo, hi).
struct RequantizeForm {
  te::Expr scaled;      // float32
  te::Expr zero_point;  // an integer of at most 16 bits, or null for none
  int64_t lo = 0, hi = 0;
};

/// `cast` as a RequantizeForm when it is a Cast to an integer type of at most 16 bits of
/// min(max(round(y) [+ cast(float32, z)], lo), hi) (or max outside min) with lo <= hi integer
/// constants in that type's range; nullopt otherwise.
std::optional<RequantizeForm> match_requantize(const te::ExprNode& cast);

/// The form's result as int32 (`scaled` a float or a vector of them, `zero_point` int32 of the same
/// lanes or null) through llvm.arm.vcvtr, lane by lane: only for 32-bit Arm with a VFP, in the
/// default rounding mode.
llvm::Value* emit_requantize_vcvtr(llvm::IRBuilder<>& b, const RequantizeForm& form, llvm::Value* scaled,
                                   llvm::Value* zero_point);

}  // namespace kiln::llvm_backend
