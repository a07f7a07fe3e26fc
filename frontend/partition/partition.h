/// \file Fusion of a graph's run-time nodes into subgraphs: the unit the scheduler tunes and codegen
/// emits as one kernel.
///
/// Follows TVM's FuseOps so that the subgraphs are the ones Ansor's task extraction would see:
///  1. every run-time node gets a pattern (op_pattern.h);
///  2. a post-dominator tree over the nodes records, per node, the nearest node every path from it
///     reaches and the largest edge pattern on the way (edge pattern = the consumer's pattern, but a
///     broadcast consumer whose input already has the output shape is an elementwise edge);
///  3. nodes fuse into their post-dominator when every node on the paths between allows it:
///     - phase 0: an OutEWiseFusable anchor (conv, matmul, pooling) absorbs a post-dominating chain of
///       elementwise/broadcast ops (conv + bias + BN + ReLU + residual add + ReLU), except a widening
///       op (DequantizeLinear) that only a reduction reads: unlike TVM, that op fuses forward into the
///       reduction, so the narrow value is what crosses between the subgraphs;
///       an elementwise/broadcast node fuses forward into an injective, elementwise, reduction or
///       already-anchored consumer group (the reduction reads it as an input: x*x -> ReduceSum);
///     - phase 1: injective nodes fuse into an injective (or elementwise) chain after them, and, unlike
///       TVM, also into a following reduction as its input (Transpose -> ReduceMean);
///     - reductions never fuse forward, so a subgraph has at most one reduction or anchor
///       (checked again when merging), and an opaque node is always alone.
///  A node whose output also leaves the group (several consumers, or a graph output) has no
///  post-dominator inside it, so it ends the group unless every consumer is fused too.
/// The pass is deterministic and does not depend on how the file orders its nodes: it walks them in
/// post-DFS order from the graph outputs (operands in argument order), as TVM walks an expression.
#pragma once
#include <string>
#include <vector>

#include "frontend/ir/graph.h"
#include "frontend/partition/op_pattern.h"

namespace kiln {

/// One fused group of run-time nodes.
struct Subgraph {
  int id = 0;
  std::vector<int> nodes;  // indices into Graph::nodes, in topological order
  int anchor = -1;         // the node with the largest pattern (first such), an index into Graph::nodes
  OpPattern pattern = OpPattern::ElemWise;  // the largest pattern of its nodes
  /// Values read but not produced here, in first-use order: other subgraphs' outputs, graph inputs and
  /// constants (weights). Lowering makes each a placeholder.
  std::vector<std::string> inputs;
  /// Values produced here that another subgraph reads or that are graph outputs, in production order.
  std::vector<std::string> outputs;
  /// The guards of all its nodes (one run-time If branch's): the subgraph runs only when they hold.
  std::vector<Guard> guards;
};

/// A value flowing from one subgraph to another.
struct SubgraphEdge {
  int from = 0;
  int to = 0;
  std::string value;
};

/// The fused graph: subgraphs in a topological order (producers first) and the edges between them.
struct SubgraphDAG {
  std::vector<Subgraph> subgraphs;
  std::vector<SubgraphEdge> edges;
};

/// Requires a shape-inferred graph (load_model's result). Nodes whose outputs were all folded to
/// constants are left out; their values are constants the subgraphs read.
SubgraphDAG partition_graph(const Graph& g);

/// The pattern of every node of `g` (Opaque for folded nodes), as partition_graph sees them.
std::vector<OpPattern> node_patterns(const Graph& g);

/// Whether a node computes something at run time (some output is not a folded constant).
bool is_runtime_node(const Graph& g, const Node& n);

/// One block per subgraph: pattern, anchor, node names, input and output values with their types;
/// then the edges.
std::string print_subgraph_dag(const Graph& g, const SubgraphDAG& dag);

}  // namespace kiln
