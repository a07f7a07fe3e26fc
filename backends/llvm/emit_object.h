/// \file LLVM module -> optimised object file for a target machine.
#pragma once
#include <llvm/IR/Module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "targets/target.h"

namespace llvm {
class TargetMachine;
}

namespace kiln::llvm_backend {

/// What code generation needs to know of a target (targets/ holds the full description).
struct MachineSpec {
  std::string triple = "x86_64-unknown-linux-gnu";
  std::string cpu = "x86-64";
  std::string features;  // LLVM feature string, e.g. "+avx2,+fma"
  /// Contract a*b+c into one fused multiply-add (one rounding instead of two). Off keeps every multiply
  /// and add apart, as the loop IR writes them; targets turn it on where it measured faster.
  bool fused_multiply_add = false;
};

/// The code generation part of a target description.
MachineSpec machine_of(const Target& t);

/// A TargetMachine for the spec (position-independent code, static on bare metal; O3). Throws Error for an unknown triple/cpu.
std::unique_ptr<llvm::TargetMachine> make_target_machine(const MachineSpec& spec);

/// Sets the module's triple and data layout from the machine.
void configure_module(llvm::Module& m, llvm::TargetMachine& tm);

/// The stack a module's external functions need: the deepest chain of frames through the direct calls
/// of the optimised module, each frame as instruction selection laid it out (LLVM's stack-usage
/// output). What it cannot see is listed, not guessed: callees outside the module (memcpy, libm, the
/// runtime kernels) and indirect calls (a context's parallel_for).
struct StackEstimate {
  int64_t bytes = 0;
  std::vector<std::string> not_counted;  // sorted: "indirect calls (...)", "memset", ...
  bool dynamic = false;                  // some frame has a run-time size (its static part is counted)
};

/// Runs LLVM's O3 pipeline on the module and writes an ELF object file to `path`; with `stack`, also
/// estimates the stack the module's external functions need.
void emit_object(llvm::Module& m, llvm::TargetMachine& tm, const std::string& path, StackEstimate* stack = nullptr);

/// Runs the same pipeline and returns the target's assembly: PTX text for NVPTX targets.
std::string emit_assembly(llvm::Module& m, llvm::TargetMachine& tm);

}  // namespace kiln::llvm_backend
