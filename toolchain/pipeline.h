/// \file The compiler's table of contents: every step from a model file to what the backends consume.
#pragma once
#include <functional>
#include <string>

#include "frontend/ir/graph.h"
#include "frontend/partition/partition.h"
#include "frontend/passes/bind_input_shapes.h"

namespace kiln {

struct PipelineOptions {
  ShapeBindings bindings;
  /// Step names after which to print the graph ("import", "bind", "infer", "prune", "partition"), or "all".
  std::vector<std::string> dump_after;
  std::function<void(const std::string& step, const Graph&)> on_dump;
  /// Receives the printed result of steps whose result is not a graph ("partition": the SubgraphDAG).
  std::function<void(const std::string& step, const std::string& text)> on_dump_text;
};

/// Names of the frontend steps, in order.
const std::vector<std::string>& frontend_steps();

/// Imports a model and brings it to a static-shape graph with everything computable at compile time
/// folded: import -> bind input shapes -> infer shapes (+ fold) -> remove dead nodes.
Graph load_model(const std::string& path, const PipelineOptions& opts);

/// The partition step: the graph's run-time nodes fused into subgraphs (frontend/partition/partition.h).
SubgraphDAG partition_model(const Graph& g, const PipelineOptions& opts);

/// Prints a graph as text: inputs, outputs, and one line per node with its output types.
std::string print_graph(const Graph& g);

}  // namespace kiln
