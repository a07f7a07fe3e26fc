/// \file The nodes a rewrite puts in place of one node (an If's merges, a Loop's iterations, an
/// LSTM's steps): named under that node, run under its guards, their new values left untyped for
/// infer_shapes. One piece, so every rewrite names its nodes uniquely (after their output values)
/// and keeps its node's guards.
#pragma once
#include <string>
#include <vector>

#include "frontend/ir/graph.h"

namespace kiln {

class NodeEmitter {
 public:
  NodeEmitter(Graph& g, const Node& owner) : g_(g), owner_(owner) {}

  std::vector<Node>& nodes() { return nodes_; }

  /// A node of `op` with one output: `out` when given (one of the owner's outputs), else a new untyped
  /// value "<owner>/<op>" (made unique). Default domain at opset 13, or kiln's at opset 1.
  std::string op(const std::string& op, std::vector<std::string> ins, Attributes attrs = {}, const std::string& out = "",
                 const std::string& domain = "");
  /// Constants under the owner's name: an int64 scalar, an int64 vector.
  std::string int64(int64_t v);
  std::string ints(const std::vector<int64_t>& v);
  /// A new untyped value "<owner>/<base>" (made unique), for an output of a node built by hand.
  std::string fresh(const std::string& base);
  /// Adds a node built by hand (several outputs, a subgraph), under the owner's guards.
  void add(Node n);

 protected:
  Graph& g_;
  const Node& owner_;

 private:
  std::vector<Node> nodes_;
};

/// Appends to g.nodes an Identity copying tensor `from` to a new value named `base` (made unique),
/// typed as `from` is (a constant stays one), and returns that value: how inference gives a graph
/// output a name of its own after the nodes are inferred (a sequence's tensors, a run-time count).
std::string append_copy(Graph& g, const std::string& from, const std::string& base);

/// Replaces g.nodes[index] by `nodes`, in place.
void replace_node(Graph& g, size_t index, const std::vector<Node>& nodes);

}  // namespace kiln
