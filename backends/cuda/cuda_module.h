/// \file The CUDA codegen stage: a lowered model's kernels as PTX (LLVM's NVPTX back end) and as a
/// cubin for the target's GPU (ptxas), so a package needs no compiler on the user's machine.
///
/// Each kernel reads the addresses of the buffers it touches from a table in device memory (its one
/// parameter, backends/llvm/codegen.h), which the package's launch helper (runtime/cuda) fills.
#pragma once
#include <string>
#include <vector>

#include "backends/llvm/codegen.h"
#include "backends/llvm/emit_object.h"
#include "scheduler/lower/loop_ir.h"
#include "scheduler/lower/lower_gpu.h"
#include "targets/target.h"

namespace kiln::cuda {

struct CudaProgram {
  std::string arch;  // the GPU, e.g. sm_90 (the target's cpu)
  std::string ptx;
  std::string cubin;  // bytes
  std::vector<llvm_backend::GpuKernel> kernels;  // in launch order
};

/// PTX for `f` (whose body is kernels only: scheduler/lower/lower_gpu.h) on the NVPTX machine `spec`
/// (triple nvptx64-nvidia-cuda, cpu sm_XX), assembled by ptxas. Float64 functions that have no
/// inline code (exp, log, ...) are taken from the toolkit's libdevice. Throws Error when LLVM or
/// ptxas rejects the program, with ptxas's first lines.
CudaProgram generate_cuda_program(const lower::LoweredFunc& f, const llvm_backend::MachineSpec& spec);

/// The GPU schedule's parameters for a GPU of `multiprocessors` multiprocessors and `limits` (a CUDA
/// target's `cores` and [gpu] table): what kiln compile and the tuner's builder both lower with.
lower::GpuScheduleParams gpu_schedule_for(int multiprocessors, const GpuLimits& limits);

/// The cubin of `ptx` for `arch` (ptxas -arch=ARCH -O3). Throws Error with ptxas's message.
std::string assemble_ptx(const std::string& ptx, const std::string& arch);

}  // namespace kiln::cuda
