/// \file Round-half-to-even as float arithmetic where the target has no instruction for it.
///
/// Why: kiln rounds to nearest even everywhere (ONNX's Round, the int8 requantization, the range
/// reductions of exp and friends) through llvm.roundeven, and where the target has no rounding
/// instruction (a Cortex-M4's FPv4, x86-64 without SSE4.1) LLVM calls libm's roundevenf for every
/// element: newlib's moves the float through memory with four memcpy calls, which alone were 27%
/// of the int8 keyword spotter's instructions on the M4 (one call per output of each requantized
/// conv). Float addition rounds to nearest even already: for |x| < 2^23,
/// (|x| + 2^23) - 2^23 is |x| rounded so (every float in [2^23, 2^24) is an integer), with the sign
/// of x put back (so -0.4 gives -0.0 as roundeven does); larger magnitudes, infinities and NaN are
/// already integral and pass through. The same holds for doubles with 2^52. Exact in the default
/// rounding mode, which kiln's code never changes. Where the target rounds in the current mode in one
/// instruction (nearbyint: the Cortex-M7's VRINTR), that instruction is used instead: in the default
/// mode it is the same rounding.
#pragma once
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

namespace kiln::llvm_backend {

/// Replaces every call of llvm.roundeven in `m` whose type has no such instruction on `tm` (the
/// operation is not legal there, after splitting a vector wider than its registers) by nearbyint
/// where that is legal, else by the float arithmetic above where float addition is an instruction.
/// Returns how many were replaced.
int expand_roundeven_without_instruction(llvm::Module& m, llvm::TargetMachine& tm);

}  // namespace kiln::llvm_backend
