/// \file Where the CUDA toolkit is: ptxas turns kiln's PTX into a cubin at compile time, and the
/// driver API's header and link stub build a package's host code and runners. No GPU is needed for
/// any of it; a package's cubin runs only where one is.
#pragma once
#include <string>

namespace kiln::cuda {

/// $KILN_CUDA_ROOT when set, otherwise /usr/local/cuda.
std::string cuda_root();

/// cuda_root()/bin/ptxas.
std::string ptxas_path();

/// Whether ptxas exists and runs (`ptxas --version`), checked once per process.
bool have_ptxas();

/// Compiler flags for host C code that includes <cuda.h>, and linker flags for a program that calls
/// the driver API (the toolkit's stub libcuda.so; the driver's libcuda.so.1 is used at run time).
std::string cuda_include_flags();
std::string cuda_link_flags();

/// Whether this machine has an NVIDIA GPU with a loaded driver (/dev/nvidia0 or nvidia-smi works),
/// so GPU tests can skip cleanly where there is none.
bool have_cuda_device();

}  // namespace kiln::cuda
