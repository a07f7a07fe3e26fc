/// \file Inline math for generated code: exp, log, erf, tanh and sigmoid as polynomials in LLVM IR.
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

}  // namespace kiln::llvm_backend
