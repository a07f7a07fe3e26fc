/// \file The package stage: lib<m>.a + <m>.h + <m>.json (+ <m>Config.cmake and the optional pthread
/// pool) written from a generated model module. It only writes files: every decision was made by the
/// stages before it (toolchain/pipeline.cc).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backends/package/c_names.h"
#include "backends/package/memory_report.h"
#include "backends/package/model_module.h"

namespace kiln::package {

struct PackageOptions {
  std::string target_name;  // for the metadata
  std::string target_file;  // the target file, absolute: `kiln run` finds a target given as a path
  // The target's C compiler. It compiles the runtime kernels (runtime/kernels/) of ops that are not
  // loop nests (TopK, Det, BitCast) into lib<name>.a, so a model that has such ops needs it. When set
  // and it works, the optional pthread pool is also shipped compiled (kiln_parallel_pthread.o); the
  // .c/.h are shipped either way.
  std::string cc;
  std::string source;  // the model file, for the metadata
  /// How the kernels were scheduled, per stage in the metadata: "default", or "custom" (random or
  /// tuning records).
  std::string schedule = "default";
  /// Set for bare-metal targets: the package ships a linker script for this memory map and the startup
  /// file (board_files.h) instead of the pthread pool, which a board without an OS cannot use.
  std::optional<BareMetalMemory> bare_metal;
  /// When set, a package whose SRAM need (MemoryReport::sram_bytes) is larger fails with an Error naming
  /// both numbers, and nothing is written.
  std::optional<int64_t> max_sram_bytes;
};

struct PackageInfo {
  std::string dir;
  std::vector<IoInfo> inputs, outputs;
  int64_t workspace_size = 0;
  int64_t workspace_lower_bound = 0;
  int64_t weights_bytes = 0;
  std::string model_hash;
  std::optional<MemoryReport> memory;  // CPU packages
};

/// Writes the package of `m` into DIR (created if needed): lib<m>.a (the model's object, optimised and
/// emitted now, plus the runtime kernels it calls, compiled with opts.cc), <m>.h, <m>.json, a CMake
/// package file <m>Config.cmake (IMPORTED target kiln::<m>), and the optional pthread pool
/// kiln_parallel_pthread.{c,h} (+ .o when opts.cc compiles it), which the library never needs. Files
/// are written to a temporary directory beside DIR and moved into place only when everything
/// succeeded, so a failure leaves nothing half-written. Only the package's own files in DIR are
/// replaced. Throws Error naming what failed.
PackageInfo write_package(ModelModule& m, const PackageOptions& opts, const std::string& dir);

}  // namespace kiln::package
