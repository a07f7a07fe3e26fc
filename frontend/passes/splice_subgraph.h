/// \file A subgraph's nodes copied into the graph around it: how an If's branches and the iterations
/// of an unrolled Loop or Scan become ordinary nodes.
///
/// Why one piece: the copy must rename everything the subgraph defines apart from the graph's values
/// (a Loop body is copied once per iteration), bind its declared inputs to outer values, leave its
/// reads of outer values alone, and follow renamed values into nested subgraphs (an If in a Loop body
/// reading the body's values). Getting that right once serves If, Loop and Scan.
#pragma once
#include <string>
#include <vector>

#include "frontend/ir/graph.h"

namespace kiln {

/// The most nodes a graph may grow to by splicing, unrolling and expanding (If branches, Loop and
/// Scan iterations, recurrent layers' steps): a bound on compile time and memory that a mistaken or
/// hostile model cannot pass, nested loops multiplying. A 5000-node graph compiles in about 15 s.
constexpr size_t kMaxExpandedNodes = size_t{1} << 16;

/// Throws Unsupported naming `owner` when `added` more nodes would take `g` past kMaxExpandedNodes.
void check_expansion(const Graph& g, size_t added, const std::string& owner);

struct SplicedSubgraph {
  std::vector<Node> nodes;
  std::vector<std::string> outputs;  // the names in the outer graph of the subgraph's outputs
};

/// The nodes of `body`, for the outer graph `g`: values the body defines (its constants included) are
/// added to `g` as "<prefix><name>" (made unique); body input i reads outer value `inputs[i]`; reads
/// of other outer values keep their names. Node names get the prefix too, and each node `guards`
/// before its own. `owner` names the node the body belongs to in errors. Throws Error when the body
/// declares another number of inputs or an output it does not define, Unsupported when its nodes
/// would take `g` past kMaxExpandedNodes.
SplicedSubgraph splice_subgraph(Graph& g, const Graph& body, const std::string& prefix, const std::vector<Guard>& guards,
                                const std::vector<std::string>& inputs, const std::string& owner);

/// The graph attribute `name` of `node`; throws Error naming the node when it is missing.
const Graph& subgraph_attr(const Node& node, const std::string& name);

}  // namespace kiln
