/// \file LLVM IR for the operators of the expression language (scheduler/te/expr.h): element types,
/// casts, unary and binary operators, on scalars and vectors alike. codegen.cc decides where values
/// come from (loops, lanes, memory, masks); these decide only how one operator computes, so the two
/// change for different reasons.
#pragma once
#include <llvm/IR/IRBuilder.h>

#include "frontend/ir/dtype.h"
#include "scheduler/te/expr.h"

namespace kiln::llvm_backend {

/// How an element of `t` is stored: float16 as half, bfloat16 as bfloat, bool as i8.
llvm::Type* memory_type(llvm::LLVMContext& ctx, DType t);
/// What a value of `t` is computed in: float16 and bfloat16 widen to float, bool is i1.
llvm::Type* value_type(llvm::LLVMContext& ctx, DType t);
/// value_type(t), as a vector of the same width when `like` is a vector.
llvm::Type* value_type_like(llvm::Value* like, DType t);

/// float -> bfloat16 rounded to nearest even, in integer operations (see the definition for why).
llvm::Value* emit_float_to_bfloat(llvm::IRBuilder<>& b, llvm::Value* v);
/// bfloat16 -> float (exact: the bits moved up), in integer operations: instruction selection for ARM
/// has no extending load from bfloat (LLVM 19 aborts on one), and this is what the others emit anyway.
llvm::Value* emit_bfloat_to_float(llvm::IRBuilder<>& b, llvm::Value* v);
/// A loaded float16 or bfloat16 (scalar or vector) as float.
llvm::Value* emit_widen(llvm::IRBuilder<>& b, llvm::Value* v);
/// Converts `v` (a value of `from`) to `to`: float -> integer saturates, narrow floats round.
llvm::Value* emit_cast(llvm::IRBuilder<>& b, llvm::Value* v, DType from, DType to);
/// A unary operator on `x`, a value of dtype `t`. float32 math is inline (math_polynomials.h);
/// float64 calls libm. Throws Error for an operator the dtype lacks.
llvm::Value* emit_unary_op(llvm::IRBuilder<>& b, te::ExprOp op, DType t, llvm::Value* x);
/// A binary operator on values of dtype `t`, with te's semantics (integer division by zero defined,
/// shifts past the width give 0, floor division and modulo round down).
llvm::Value* emit_binary_op(llvm::IRBuilder<>& b, te::ExprOp op, DType t, llvm::Value* x, llvm::Value* y);

}  // namespace kiln::llvm_backend
