#include "backends/measure/cuda_candidate.h"

#include <fmt/format.h>

#include "backends/cuda/cuda_toolkit.h"
#include "backends/package/runtime_sources.h"

namespace kiln::measure {

std::string cuda_candidate_source(const cuda::CudaProgram& program, const std::string& func_name) {
  std::string cubin;
  cubin.reserve(program.cubin.size() * 5 + 64);
  for (size_t i = 0; i < program.cubin.size(); ++i)
    cubin += fmt::format("{}{}", static_cast<unsigned>(static_cast<unsigned char>(program.cubin[i])),
                         i % 24 == 23 ? ",\n" : ",");
  std::string kernels;
  for (const llvm_backend::GpuKernel& k : program.kernels)
    kernels += fmt::format("    {{\"{}\", {}u, {}u}},\n", k.name, k.grid, k.block);
  return fmt::format(R"({measure}
/* The candidate: its cubin ({arch}) and kernels in launch order. */
static const unsigned char kiln_candidate_cubin[] = {{
{cubin}0}};
static const kiln_measure_kernel kiln_candidate_kernels[] = {{
{kernels}    {{0, 0u, 0u}}}};

__attribute__((visibility("default"))) int {func}_gpu_measure(void** host, const unsigned long long* bytes,
    const unsigned char* roles, int n, unsigned number, unsigned repeat, unsigned min_repeat_ms, double slow_call_s,
    double* costs, int* ncosts, char* err, int errlen) {{
  return kiln_cuda_measure(kiln_candidate_cubin, kiln_candidate_kernels, {num_kernels}, host, bytes, roles, n, number,
                           repeat, min_repeat_ms, slow_call_s, costs, ncosts, err, errlen);
}}
)",
                     fmt::arg("measure", package::kCudaMeasureC), fmt::arg("arch", program.arch), fmt::arg("cubin", cubin),
                     fmt::arg("kernels", kernels), fmt::arg("func", func_name),
                     fmt::arg("num_kernels", program.kernels.size()));
}

std::vector<std::string> cuda_candidate_flags(const std::string& source_path) {
  const std::string root = cuda::cuda_root();
  return {"-fPIC", "-O2", "-I" + root + "/include", source_path, "-L" + root + "/lib64/stubs", "-L" + root + "/lib64",
          "-lcuda"};
}

}  // namespace kiln::measure
