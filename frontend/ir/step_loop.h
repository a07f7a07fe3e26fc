/// \file kiln.StepLoop: a loop the generated code runs, its body compiled once.
///
/// Why: unrolling a loop puts one copy of its body in the graph per iteration, so compile time, memory
/// and package size grow with the trip count (an LSTM over 2000 frames: 350 s, 2.4 GB and a 22 MB
/// library). A StepLoop keeps the body as a graph of its own; the compiler partitions, tunes and lowers
/// it once, and the model's code runs it in a `for` loop (scheduler/lower/lower_model.h).
///
/// The contract, which every engine follows:
///   inputs   carried_0 .. carried_{c-1} (initial values), then invariants (read by every iteration)
///   body     inputs: iter (int64 scalar, 0 .. trip_count-1), carried_0 .., invariants ..
///            outputs: next carried_0 .. next carried_{c-1}, then scan_0 .. (one slice per iteration)
///   outputs  the carried values after the last iteration, then each scan output stacked along a new
///            first axis: iteration k at k, or at trip_count-1-k where scan_reverse says so.
/// Attributes: body (graph), trip_count (>= 1), carried (c), scan_reverse (one 0/1 per scan output).
/// The body is closed: it reads nothing from outside but its inputs and its own constants.
///
/// A loop that may end early (an ONNX Loop with a condition or trip count decided at run time) has
///   condition = 1   carried value 0 is a bool scalar: iteration k runs only while it holds (the
///                   body's output 0 is then the next iteration's condition);
///   trip_limit = 1  the first invariant is an int64 scalar M: iteration k runs only when k < M;
/// trip_count is then the most iterations it runs (the user's bound), an iteration that does not run
/// leaves the carried values as they are, and such a loop has no scan outputs (their length would be
/// decided at run time).
#pragma once
#include <memory>
#include <vector>

#include "frontend/ir/graph.h"

namespace kiln {

struct StepLoop {
  std::shared_ptr<const Graph> body;
  int64_t trip_count = 1;
  int64_t carried = 0;
  std::vector<int64_t> scan_reverse;
  bool condition = false;   // carried value 0 decides whether iteration k runs
  bool trip_limit = false;  // invariant 0 (input `carried`) is a run-time trip count
  /// Whether iterations are decided at run time (either of the above).
  bool may_stop() const { return condition || trip_limit; }
};

/// Whether `n` is a kiln.StepLoop.
bool is_step_loop(const Node& n);

/// The loop of `n`, checked against the contract (counts of inputs and outputs, types of the carried
/// values); throws Error naming the node otherwise.
StepLoop read_step_loop(const Node& n);

/// A StepLoop node named `name` with these attributes (the body must be typed: its inputs and
/// outputs have dtypes and shapes).
Node make_step_loop(const std::string& name, const StepLoop& loop, std::vector<std::string> inputs,
                    std::vector<std::string> outputs);

}  // namespace kiln
