/// \file Inline math for generated code: exp, log, erf, tanh, sigmoid, trigonometric, hyperbolic and
/// inverse functions, pow and fmod as polynomials / exact integer code in LLVM IR (float32 only).
/// Generated packages must not need libm (firmware has none, and a call per element defeats
/// vectorization), so these work on float scalars and float vectors alike.
#pragma once
#include <llvm/IR/IRBuilder.h>

namespace kiln::llvm_backend {

/// Each takes and returns a float or <N x float>. Accuracy (max abs or rel error over the float
/// range) is documented at each definition; all are well inside kiln's 1e-4 conformance tolerance.
llvm::Value* emit_exp(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_log(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_erf(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_tanh(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_sigmoid(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_sin(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_cos(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_tan(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_atan(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_asin(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_acos(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_sinh(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_cosh(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_asinh(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_acosh(llvm::IRBuilder<>& b, llvm::Value* x);
llvm::Value* emit_atanh(llvm::IRBuilder<>& b, llvm::Value* x);
/// C pow(x, y) and fmod(x, y) semantics (signs, zeros, infinities, NaN) for float operands.
llvm::Value* emit_pow(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y);
llvm::Value* emit_fmod(llvm::IRBuilder<>& b, llvm::Value* x, llvm::Value* y);

}  // namespace kiln::llvm_backend
