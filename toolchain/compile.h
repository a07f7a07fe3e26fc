/// \file `kiln compile` and running compiled packages (`kiln run DIR`, conformance --engine compiled).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "backends/package/package.h"
#include "frontend/ir/graph.h"
#include "frontend/passes/bind_input_shapes.h"

namespace kiln {

/// A target (targets/*.toml) as code generation and running need it; "host" picks this machine's.
struct CompileTarget {
  std::string name;
  llvm_backend::MachineSpec machine;
  int vector_bits = 128;
  std::string cc = "cc";        // links runners for this target
  std::string run_prefix;       // e.g. "qemu-aarch64 -L /usr/aarch64-linux-gnu"; empty for native
  int cores = 1;                // parallel loops of tuned and random schedules are planned for these
};
CompileTarget resolve_target(const std::string& name);

/// Compiles a prepared (shape-inferred) graph into a package in `dir`.
/// `scheduler` schedules each subgraph (null: the default schedule; toolchain/schedule_choice.h).
package::PackageInfo compile_graph(const Graph& g, const CompileTarget& target, const std::string& name,
                                   const std::string& dir, const lower::SubgraphScheduler& scheduler = nullptr);

struct PackageRun {
  std::vector<Tensor> outputs;  // in the package's output order
  double median_ms = 0;
  double min_ms = 0;  // the fastest run: the least disturbed by other work on a shared machine
};

/// The inputs and outputs a package declares (from its <name>.json), and the target it was built for.
struct PackageSignature {
  std::string name;
  std::string target;
  std::vector<package::IoInfo> inputs, outputs;
};
PackageSignature read_package_signature(const std::string& dir);

/// Links a small runner against DIR's library with the target's C compiler, runs it (under the
/// target's run prefix) `repeat` times on `inputs` (by ONNX input name) and reads the outputs back.
/// threads == 1 runs serially (NULL context); threads > 1 links the package's pthread pool and passes
/// a context whose parallel_for uses that many threads (the caller included).
PackageRun run_package(const std::string& dir, const CompileTarget& target, const std::map<std::string, Tensor>& inputs,
                       int repeat, int threads = 1);

}  // namespace kiln
