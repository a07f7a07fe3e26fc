/// \file A whole graph as tensor expressions.
#pragma once
#include <map>
#include <string>

#include "frontend/ir/graph.h"
#include "scheduler/te/compute.h"

namespace kiln::te {

/// The graph's run-time computation as one compute DAG: graph inputs become placeholders, constants
/// become constant placeholders, and every node whose outputs are not folded is lowered with its
/// op's OpLowering. `inputs` and `outputs` map graph value names to DAG tensors.
struct LoweredGraph {
  ComputeDAG dag;
  std::map<std::string, TensorRef> inputs;
  std::vector<TensorRef> outputs;  // in graph output order
};

/// Requires a shape-inferred graph. Throws Unsupported for an op without a lowering.
LoweredGraph lower_graph(const Graph& g);

}  // namespace kiln::te
