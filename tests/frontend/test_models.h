/// \file Helpers for tests that write small ONNX models to a temporary directory.
#pragma once
#include <filesystem>
#include <functional>
#include <string>

#include "backends/package/package.h"
#include "frontend/ir/graph.h"
#include "frontend/onnx/model_builder.h"
#include "frontend/passes/bind_input_shapes.h"
#include "toolchain/compile_target.h"

namespace kiln::testing {

/// A fresh directory under the system temp dir, removed when the object goes.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  std::string path(const std::string& file) const { return (dir_ / file).string(); }

 private:
  std::filesystem::path dir_;
};

/// What the kiln binary did: its exit code and everything it wrote on stderr.
struct CliResult {
  int exit_code;
  std::string stderr_text;
};
/// Runs `kiln ARGS` (stdout discarded, at most 60 s), keeping stderr in `dir`.
CliResult run_kiln(const std::string& args, const TempDir& dir);

/// What the kiln binary did, with both streams.
struct CliOutput {
  int exit_code = -1;
  std::string out, err;
};
/// Runs `kiln ARGS` (at most `timeout_s` seconds), keeping stdout and stderr (in files in `dir`).
CliOutput run_kiln_output(const std::string& args, const TempDir& dir, int timeout_s = 300);
/// Whether `tool` is a command on PATH (qemu-system-arm, arm-none-eabi-gcc: tests that need one skip without it).
bool have_tool(const std::string& tool);
/// The whole file ("" when it cannot be read).
std::string read_file(const std::string& path);

/// A float32 tensor of `shape` with values uniform in [-1, 1) from `seed`: weights for test models.
Tensor random_weights(const Shape& shape, uint32_t seed);

/// x[1,4] float -> Relu -> y: the smallest useful model, for tests to mutate.
ModelBuilder relu_model();

/// An LSTM, GRU or RNN over X [seq, batch, input] (layout 0) with random weights W, R (and B, P,
/// initial_h, initial_c) as initializers, and outputs Y, Y_h (and Y_c). `sequence_lens`, when given,
/// is an initializer, or a graph input when `lens_input`. `attrs` adds the node's other attributes.
struct RecurrentModel {
  std::string op = "LSTM";
  int64_t seq = 3, batch = 2, input = 4, hidden = 5;
  std::string direction = "forward";
  int64_t layout = 0;
  bool bias = true, initial_state = true, peepholes = false;
  std::vector<int64_t> sequence_lens;  // empty: none
  bool lens_input = false;
  int64_t hidden_size_attr = 0;  // the attribute hidden_size when it should disagree with the weights
  std::function<void(ModelBuilder::NodeRef&)> attrs;
};
ModelBuilder recurrent_model(const RecurrentModel& m);

/// A Loop body over x [2, 2]: x = x * scale + i (+ bias, an outer value, when `bias`); its condition
/// output is ReduceSum(x) < limit (an outer value) when `until_limit`, else the condition it was
/// given; with `scan`, each iteration's x is also a scan output.
struct ScaleLoopBody {
  double scale = 2;
  bool until_limit = false, scan = false, bias = false;
};
ModelBuilder scale_loop_body(const ScaleLoopBody& spec);
/// A Loop of `trips` iterations whose carried value (x [1] at first) grows by one element each:
/// x negated `negations` times, appended (so it cannot be a StepLoop, and is unrolled).
ModelBuilder growing_loop(int64_t trips, int negations);
/// A Scan body over rows [2]: sum = sum + row, each step's sum also a scan output.
ModelBuilder running_sum_body();
/// x [1, 16, 8, 8] -> two 3x3 convs with bias and relu (b, c; 32 channels), which the substitution
/// search merges, each read by a 1x1 conv (b2, c2, one task of two occurrences), the graph outputs.
ModelBuilder two_conv_branches();

/// `b` imported, bound, shape-inferred and pruned: the graph the compiler's rewrites start from.
Graph prepared_graph(ModelBuilder& b);
/// The message of the Error that preparing `b` (prepared_graph) throws; "" when it prepares.
std::string prepare_error(ModelBuilder& b);

/// A model compiled for this host as `kiln compile` compiles it: `b` saved in `dir`, loaded
/// (load_model) and compiled into dir's "pkg".
class HostPackage {
 public:
  HostPackage(ModelBuilder& b, const TempDir& dir, const ShapeBindings& bindings = {});
  /// A graph already loaded (or built by hand, as kiln's own ops are), for `target` (one whose code
  /// this machine runs).
  HostPackage(const Graph& g, const TempDir& dir, const std::string& target = "host");
  const Graph& graph() const { return graph_; }
  const package::PackageInfo& info() const { return info_; }
  /// The package's outputs for `inputs`, on one thread.
  std::vector<Tensor> run(const std::map<std::string, Tensor>& inputs) const;

 private:
  Graph graph_;
  std::string dir_;
  CompileTarget target_;
  package::PackageInfo info_;
};

/// The op types of g's nodes, in order.
std::vector<std::string> op_types(const Graph& g);
/// Expects `after` to equal `before` element by element within 1e-5 + 1e-5 |before|: what a graph
/// rewrite that only changes rounding must keep.
void expect_same_outputs(const std::vector<Tensor>& before, const std::vector<Tensor>& after);
/// Applies graph rewrite `rewrite` to `g` (then drops what it left unused) and expects the reference
/// interpreter to give the same outputs, as above, for every graph input seeded at random; returns
/// what `rewrite` returned (how many rewrites it made).
int rewrite_and_compare(Graph& g, const std::function<int(Graph&)>& rewrite);

}  // namespace kiln::testing
