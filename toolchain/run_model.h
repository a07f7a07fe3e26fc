/// \file `kiln run`: evaluate a model on given or seeded inputs and print the outputs.
#pragma once
#include <cstdint>
#include <map>
#include <ostream>
#include <string>

#include "frontend/ir/graph.h"
#include "frontend/passes/bind_input_shapes.h"

namespace kiln {

struct RunOptions {
  std::string engine = "reference";
  ShapeBindings bindings;
  std::map<std::string, std::string> input_files;  // graph input -> TensorProto .pb file
  uint64_t seed = 0;
  int64_t print_limit = 16;  // values printed per output
  std::string output_dir;    // when set, outputs are also written there as output_N.pb
  std::string inputs_dir;    // when set, the inputs used are written there as input_N.pb (ONNX test-case layout)
  int repeat = 1;            // package runs: timed repetitions (the median is printed)
  int threads = 1;           // package runs: 1 = serial (NULL context); T > 1 = the pthread pool, T threads
};

/// Inputs not given as files are filled from the seed: floats uniform in [-1, 1), integers in [0, 10),
/// bools fair coins; so a run is reproducible from the command line alone.
Tensor seeded_input(const Value& v, uint64_t seed, size_t input_index);

/// Runs a model file with the reference interpreter, or a compiled package directory natively / under
/// the target's run prefix (then also prints "median: X ms" over `repeat` runs). Prints, per output,
/// its name, dtype, shape and first values.
void run_model(const std::string& path, const RunOptions& opts, std::ostream& out);

}  // namespace kiln
