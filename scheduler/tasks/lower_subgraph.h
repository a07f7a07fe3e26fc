/// \file One subgraph of a SubgraphDAG as its own compute DAG: the program a task tunes.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "frontend/ir/graph.h"
#include "frontend/partition/partition.h"
#include "scheduler/te/compute.h"

namespace kiln {

/// A subgraph lowered in isolation. Its inputs are placeholders (constant ones carry the weight, as in
/// lower_graph), so the DAG depends on nothing outside the subgraph.
struct LoweredSubgraph {
  te::ComputeDAG dag;
  /// Subgraph::inputs in order, each with its placeholder (an input no stage reads is still listed,
  /// but make_dag leaves it out of dag.placeholders).
  std::vector<std::pair<std::string, te::TensorRef>> inputs;
  std::vector<te::TensorRef> outputs;  // Subgraph::outputs in order
};

/// Lowers the subgraph's nodes with their ops' OpLowerings, in the subgraph's node order. Throws
/// Unsupported for an op without a lowering, naming the node.
LoweredSubgraph lower_subgraph(const Graph& g, const Subgraph& sg);

}  // namespace kiln
