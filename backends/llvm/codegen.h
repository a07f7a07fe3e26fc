/// \file Loop IR -> LLVM IR. Each LoweredFunc becomes
///   void NAME(void* const* buffers, const kiln_parallel* parallel)
/// where buffers[i] points at the i-th parameter's elements and `parallel` (may be null) carries the
/// parallel_for hook of the package's context: a Parallel loop's body is outlined into a task
/// function and handed to the hook, or run serially when there is none.
#pragma once
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/lower/loop_ir.h"

namespace kiln::llvm_backend {

struct CodegenOptions {
  int vector_bits = 512;  // lanes of a vectorized loop = vector_bits / 32 for float32
  /// Vectors of Dot4U8S8 as x86's vpdpbusd (AVX512-VNNI, or AVX-VNNI up to 256 bits); without it they
  /// expand into byte multiplies, which is what any other target runs.
  bool int8_dot = false;
  /// Vectors of Dot4S8S8 as AArch64's sdot (+dotprod); without it they expand likewise.
  bool int8_sdot = false;
  /// Scalar Dot4U8S8 and Dot4S8S8 as two SMLADs of byte pairs (32-bit Arm with the DSP extension:
  /// Cortex-M4, M7); without it, four multiplies of bytes picked by shifts.
  bool int8_smlad = false;
  /// A VFP on a 32-bit Arm core (Cortex-M4F, M7): scalar int8 requantization through VCVTR, which
  /// rounds to int32 in the current mode (backends/llvm/requantize.h). Codegen also checks the
  /// module's triple, since AArch64 names its FPU +fp-armv8 too.
  bool arm_vfp = false;
  /// Pairs of parameter buffers whose bytes coincide where one statement reads the first and writes
  /// the second (in-place writes, scheduler/lower/in_place_writes.h): their accesses share one alias
  /// scope, so LLVM keeps every load of the first before the store that overwrites it.
  std::vector<std::pair<const lower::Buffer*, const lower::Buffer*>> same_bytes = {};
};

/// The options for a target's LLVM feature string ("+avx512f,+avx512vnni,..."): int8_dot when it has
/// VNNI at the width of its vectors, int8_sdot when it has +dotprod, int8_smlad when it has +dsp, arm_vfp
/// when it names a VFP (+vfp2.., +vfp3.., +vfp4.., +fp-armv8..).
CodegenOptions codegen_options(int vector_bits, const std::string& features);

/// Adds the functions to `module` (whose target triple and data layout must be set).
void emit_functions(const std::vector<lower::LoweredFunc>& funcs, const CodegenOptions& opts, llvm::Module& module);

/// One CUDA kernel: its name and launch shape (blocks x threads, both along x).
struct GpuKernel {
  std::string name;
  int64_t grid = 1, block = 1;
};

/// Adds one CUDA kernel `void NAME_kI(void* const* buffers)` per top-level statement of `f` (each a
/// GpuBlock loop around a GpuThread loop; empty statements are skipped) to `module`, an NVPTX module,
/// marked as entry points. Returns them in statement order, which is the order they must run in.
std::vector<GpuKernel> emit_gpu_kernels(const lower::LoweredFunc& f, const CodegenOptions& opts, llvm::Module& module);

/// LLVM types of the runtime ABI shared with the package entry: { parallel_for, user }.
llvm::StructType* parallel_struct_type(llvm::LLVMContext& ctx);

}  // namespace kiln::llvm_backend
