/// \file A CUDA tuning candidate as a shared object that the usual runners load: the candidate's
/// cubin, its kernels in launch order, and an exported `<func>_gpu_measure` (runtime/cuda/
/// kiln_cuda_measure.c) that copies the runner's host buffers to the GPU, times the kernels with CUDA
/// events and copies the outputs back (runtime/rpc/run_module.cc calls it when it is there).
///
/// Why a shared object and not a new kind of upload: the builder, the RPC protocol, the device
/// server's child processes, the wrong-answer check and the records stay the same for boards and GPUs;
/// only what the object does when called differs. It links the driver API's stub at build time, so
/// the tuning host needs the CUDA toolkit but no GPU; the device server needs the driver only.
#pragma once
#include <string>

#include "backends/cuda/cuda_module.h"

namespace kiln::measure {

/// The C source of a candidate exporting `int <func_name>_gpu_measure(...)` (the signature is
/// GpuMeasureFn in runtime/rpc/run_module.cc) for `program`.
std::string cuda_candidate_source(const cuda::CudaProgram& program, const std::string& func_name);

/// The compiler arguments that build that source into a shared object (after `cc`, before `-o`).
std::vector<std::string> cuda_candidate_flags(const std::string& source_path);

}  // namespace kiln::measure
