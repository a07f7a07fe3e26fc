/// \file A target (targets/*.toml) as the pipeline's code generation and package runs need it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "backends/llvm/emit_object.h"

namespace kiln {

/// What code generation, measurement and running need of a target; "host" picks this machine's.
struct CompileTarget {
  std::string name;
  std::string file;  // the target file it was read from
  llvm_backend::MachineSpec machine;
  int vector_bits = 128;
  std::string cc = "cc";        // links runners for this target; compiles runtime kernels into packages
  std::string run_prefix;       // e.g. "qemu-aarch64 -L /usr/aarch64-linux-gnu"; empty for native
  int cores = 1;                // parallel loops of tuned and random schedules are planned for these
  int64_t huge_page_bytes = 0;  // where a package's weights section starts, when they fill a huge page
  std::optional<GpuLimits> gpu;  // set for CUDA targets: the package holds kernels (backends/cuda)
  std::optional<BareMetalMemory> bare_metal;  // set for boards with no OS (Cortex-M): docs/cortex-m.md
  bool is_cuda() const { return gpu.has_value(); }
  bool is_bare_metal() const { return bare_metal.has_value(); }
};

/// Loads the target file (targets/target.h) and keeps what compiling needs. Throws Error naming the
/// target when it is unknown or malformed.
CompileTarget resolve_target(const std::string& name);

}  // namespace kiln
