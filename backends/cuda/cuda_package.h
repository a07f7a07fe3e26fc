/// \file The package of a CUDA target: lib<m>.a + <m>.h + <m>.json, as for CPUs, with the kernels as
/// an embedded cubin and host code that runs them through the CUDA driver API (runtime/cuda).
///
/// <m>.h declares <m>_init (loads the cubin into the current CUDA context, uploads the weights into
/// the caller's device arena once), <m>_run (launches every kernel, asynchronously, on the context's
/// stream; inputs and outputs are device pointers) and <m>_release. The library allocates nothing:
/// the caller owns the device arena (<M>_DEVICE_ARENA_SIZE bytes) and the stream, so many instances
/// of one model run side by side with distinct arenas. Link with -lcuda.
#pragma once
#include <string>

#include "backends/cuda/cuda_module.h"
#include "backends/package/memory_plan.h"
#include "backends/package/model_module.h"
#include "backends/package/package.h"
#include "scheduler/lower/lower_model.h"

namespace kiln::cuda {

/// Device buffers are aligned to this (cudaMalloc's alignment), so every kernel may load whole vectors.
inline constexpr int64_t kDeviceAlign = 256;

struct CudaPackageOptions {
  std::string name = "model";
  std::string target_name;
  std::string cc = "cc";  // compiles the host code and the launch helper
  std::string source;     // the model file, for the metadata
};

/// Writes the package of `prog` (kernels in `code`, workspace placed by `plan`) into DIR. Throws Error
/// naming what failed; a failure leaves nothing half-written.
package::PackageInfo write_cuda_package(const lower::ModelProgram& prog, const package::ModelMemoryPlan& plan,
                                        const package::ModelIo& io, const CudaProgram& code,
                                        const CudaPackageOptions& opts, const std::string& dir);

}  // namespace kiln::cuda
