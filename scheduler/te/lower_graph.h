/// \file A whole graph as tensor expressions.
#pragma once
#include <functional>
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

/// Lowers one node with its op's OpLowering: `tensor_of` gives the tensor of each input value, and the
/// node's output tensors are recorded in `env`. Errors name the graph's file and the node.
void lower_node(const Graph& g, const Node& n, const std::function<TensorRef(const std::string&)>& tensor_of,
                std::map<std::string, TensorRef>& env);

}  // namespace kiln::te
