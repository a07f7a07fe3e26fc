/// \file Running a compiled package: `kiln run DIR`, compiled conformance, and tests. A small C
/// harness is linked against the package with the target's C compiler and run natively or under the
/// target's run prefix (QEMU), so what runs is exactly what a user links.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/package/package.h"
#include "frontend/ir/graph.h"
#include "frontend/ir/tensor.h"
#include "toolchain/compile_target.h"

namespace kiln {

struct PackageRun {
  std::vector<Tensor> outputs;  // in the package's output order
  double median_ms = 0;
  double min_ms = 0;  // the fastest run: the least disturbed by other work on a shared machine
  /// Bare-metal packages (run under QEMU with -icount, which counts instructions, not time):
  /// instructions per run (median and fewest) and the stack's high-water mark; no milliseconds.
  std::optional<double> instructions, min_instructions;
  std::optional<int64_t> stack_bytes;
};

/// The inputs and outputs a package declares (from its <name>.json), and the target it was built for.
struct PackageSignature {
  std::string name;
  std::string target;       // its name: found in the targets directory, wherever the package is run
  std::string target_file;  // the file it was read from when compiled ("" in older packages)
  std::vector<package::IoInfo> inputs, outputs;
};
PackageSignature read_package_signature(const std::string& dir);

/// For the runners' C source: `static const C_TYPE sizes[] = {...};`, the bytes of each input, then of
/// each output, then a 0.
std::string io_sizes_array(const PackageSignature& sig, const std::string& c_type);

/// Links a small runner against DIR's library with the target's C compiler, runs it (under the
/// target's run prefix) `repeat` times on `inputs` (by ONNX input name) and reads the outputs back.
/// threads == 1 runs serially (NULL context); threads > 1 links the package's pthread pool and passes
/// a context whose parallel_for uses that many threads (the caller included).
PackageRun run_package(const std::string& dir, const CompileTarget& target, const std::map<std::string, Tensor>& inputs,
                       int repeat, int threads = 1);

/// Each run-time-sized output among `outs` (named `names`) cut to the entries its count output holds;
/// `counts` maps such an output to its count output and axis, as Graph::count_outputs does. Throws
/// Error naming the output when its count output is not among `names`.
void keep_counted_entries(const std::vector<std::string>& names, const std::map<std::string, RunTimeExtent>& counts,
                          std::vector<Tensor>& outs);

}  // namespace kiln
