/// \file Loop-IR functions compiled and run inside this process (LLVM's ORC JIT, host CPU). Tests and
/// schedule checks run thousands of small programs; building a package and a process for each would
/// cost seconds where this costs milliseconds. Programs that call runtime kernels are not supported.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "scheduler/lower/loop_ir.h"

namespace kiln::llvm_backend {

/// The host CPU's LLVM feature string ("+avx2,+fma,..." or "+neon,+dotprod,..."): what the JIT
/// compiles for, so that a caller can lay a model out for the same machine.
std::string jit_host_features();

class JitFunction {
 public:
  /// Compiles `f` for the host CPU at O3 (or O0 with optimize = false, to check codegen alone).
  explicit JitFunction(const lower::LoweredFunc& f, bool optimize = true);
  ~JitFunction();
  JitFunction(const JitFunction&) = delete;
  JitFunction& operator=(const JitFunction&) = delete;

  /// Calls it: `buffers[i]` is the memory of f.params[i]. Without a parallel_for hook, parallel loops
  /// run serially; `parallel` may point at a { parallel_for, user } pair (runtime/kiln_parallel_pthread.h).
  void run(const std::vector<void*>& buffers, void* parallel = nullptr) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::llvm_backend
