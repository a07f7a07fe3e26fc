/// \file `kiln conformance`: runs ONNX test cases (model.onnx + test_data_set_*/{input,output}_N.pb).
#pragma once
#include <filesystem>
#include <functional>
#include <map>
#include <ostream>
#include <string>

#include "frontend/ir/graph.h"
#include "frontend/subst/optimizer.h"
#include "toolchain/schedule_choice.h"

namespace kiln {

struct ConformanceOptions {
  std::string engine = "reference";  // "te": op lowerings evaluated directly; "compiled": kiln compile + run
  std::string target = "host";       // for the compiled engine
  double rtol = 1e-4;
  double atol = 1e-5;
  std::string filter;                // regex on the case name; empty = all
  std::string known_failures_file;   // "case  reason" lines; those cases count as unsupported
  bool verbose = false;
  int shard_index = 0, shard_count = 1;  // run only cases whose position % count == index (bounded CI runs)
  int min_passed = 0;                // fail the run when fewer cases pass (guards against regressions)
  ScheduleChoice schedule;           // compiled engine: default schedule or a random program per task
  /// Compiled engine: build every package (for CUDA targets, PTX assembled by ptxas) without running
  /// it; a case passes when it compiles. How GPU packages are checked on machines without a GPU.
  bool compile_only = false;
  /// Graph inputs fixed to their test-data values at compile time, as a user's --freeze would (a
  /// sample rate an If tests). Inputs that shapes depend on are frozen without being named.
  std::vector<std::string> freeze;
  /// Compiled engine: search the verified graph substitutions first (`kiln compile --subst`), so
  /// the rewritten graph is what is checked.
  bool substitutions = false;
  /// With substitutions: how much cheaper a rewritten graph must be to be kept (0: any gain, so
  /// that a test checks rewrites the default would judge not worth it).
  double subst_min_gain = subst::SearchOptions{}.min_gain;
};

struct ConformanceResult {
  int passed = 0, failed = 0, unsupported = 0;
};

/// Runs every case directory under `dir` (or `dir` itself if it holds model.onnx). Input shapes are
/// bound from the test data. Floats compare with |got - want| <= atol + rtol * |want| (NaN equals NaN;
/// float16/bfloat16 outputs get at least two units of their own precision as rtol); integers and
/// bools compare exactly. Prints one line per failure (and per unsupported case with verbose) and
/// ends with "N passed, M failed, K unsupported".
ConformanceResult run_conformance(const std::string& dir, const ConformanceOptions& opts, std::ostream& out);

/// One test data set applied to its model: shapes bound from the input files, and the inputs that
/// shapes depend on (a Reshape target, a Resize size) frozen to their values, as a user would with
/// --freeze. `inputs` holds the values of the graph inputs left.
struct BoundTestData {
  Graph graph;
  std::map<std::string, Tensor> inputs;
};
/// Throws Error / Unsupported naming `set` when its files do not fit the model.
/// `run_time_shapes` false (GPU programs, which have no runtime kernels) freezes the inputs that NMS,
/// NonZero, Unique and TopK's k read, as it does the inputs shapes depend on (Graph::run_time_shapes).
BoundTestData bind_test_data(const Graph& model, const std::filesystem::path& set, const std::vector<std::string>& freeze = {},
                             bool run_time_shapes = true);

}  // namespace kiln
