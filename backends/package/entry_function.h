/// \file The package's C entry points in LLVM IR: <m>_run (named structs, status codes) and
/// <m>_run_argv (one pointer array, for harnesses), both calling the model's kernel function.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace llvm {
class Function;
class GlobalVariable;
class Module;
}  // namespace llvm

namespace kiln::package {

/// Where one parameter of the kernel function lives at run time.
struct Slot {
  enum Kind { Input, Output, Weight, Workspace } kind;
  int64_t index = 0;  // input/output field, or workspace offset
  llvm::GlobalVariable* weight = nullptr;
};

/// Adds <m>_run(ctx, in, out, workspace) and <m>_run_argv(args) to `mod`. _run checks its pointers
/// (1: NULL input, output or needed workspace) and the workspace's alignment to `workspace_align` (2),
/// builds the kernel's buffer array from `slots` and calls `kernel(buffers, ctx)`.
void emit_entry_functions(llvm::Module& mod, const std::string& m, const std::vector<Slot>& slots, size_t num_inputs,
                          size_t num_outputs, bool needs_workspace, int64_t workspace_align, llvm::Function* kernel);

}  // namespace kiln::package
