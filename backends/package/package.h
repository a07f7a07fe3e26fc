/// \file The AOT package: lib<m>.a + <m>.h + <m>.json for one model and one target.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "backends/llvm/emit_object.h"
#include "frontend/ir/graph.h"
#include "scheduler/lower/lower_model.h"

namespace kiln::package {

struct PackageOptions {
  std::string name = "model";  // C prefix: <name>_run, <NAME>_WORKSPACE_SIZE, lib<name>.a
  std::string target_name;     // for the metadata
  llvm_backend::MachineSpec machine;
  int vector_bits = 512;
  // The target's C compiler. It compiles the runtime kernels (runtime/kernels/) of ops that are not
  // loop nests (TopK, Det, BitCast) into lib<name>.a, so a model that has such ops needs it. When set
  // and it works, the optional pthread pool is also shipped compiled (kiln_parallel_pthread.o); the
  // .c/.h are shipped either way.
  std::string cc;
  // How each subgraph is scheduled (lower_model.h): null means the default schedule for vector_bits.
  // Tuned schedules come in here.
  lower::SubgraphScheduler scheduler;
};

/// One graph input or output as the C ABI shows it.
struct IoInfo {
  std::string name;    // ONNX name
  std::string c_name;  // field of <m>_inputs / <m>_outputs
  DType dtype;
  Shape shape;
  int64_t bytes;
};

struct PackageInfo {
  std::string dir;
  std::vector<IoInfo> inputs, outputs;
  int64_t workspace_size = 0;
  int64_t workspace_lower_bound = 0;
  int64_t weights_bytes = 0;
  std::string model_hash;
};

/// Compiles a shape-inferred graph into DIR (created if needed): lib<m>.a (the model's object plus the
/// runtime kernels it calls, compiled with opts.cc), <m>.h, <m>.json, a CMake
/// package file <m>Config.cmake (IMPORTED target kiln::<m>), and the optional pthread pool
/// kiln_parallel_pthread.{c,h} (+ .o when opts.cc compiles it), which the library never needs. Files
/// are written to a temporary directory beside DIR and moved into place only when everything
/// succeeded, so a failure leaves nothing half-written. Throws Error / Unsupported naming what failed.
PackageInfo build_package(const Graph& g, const PackageOptions& opts, const std::string& dir);

/// A valid C identifier for an ONNX value name ("input.1" -> "input_1", "0" -> "_0").
std::string c_identifier(const std::string& name);

}  // namespace kiln::package
