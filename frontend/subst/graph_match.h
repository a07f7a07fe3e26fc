/// \file A rule's left-hand side found in a model graph, and the graph with it replaced by the
/// right-hand side (issue 20, point 5): how the optimizer instantiates a substitution.
///
/// Terms mean ONNX ops (term_graph.h writes them so), and a match reads them back off kiln's Graph:
/// ewadd / ewmul are Add / Mul of two tensors of the output's shape (no broadcast), smul a Mul by a
/// one-element tensor, transpose a Transpose swapping the last two axes, matmul a MatMul by a matrix,
/// conv a Conv of stride 1 and dilation 1 whose padding is "same" (odd kernel, (k-1)/2 at each end) or
/// none ("valid"; a 1x1 kernel is both), with a bias input exactly when the term has one, and with a
/// fused relu when the Conv's only reader is a Relu; relu a Relu; the pools 3x3, stride 1, padding 1
/// (average counting the pad); concat a two-input Concat; split0 / split1 a Slice of one axis at
/// the split point. Axes of the matrix world (rules without conv or pooling) count from the last
/// axis, so a rule about [m, k] matrices applies to a batch of them ([b, s, k] x [k, n], BERT's
/// projections); the feature-map world's axes are NCHW's.
///
/// Instantiating checks what the rule's proof does not: the rewritten graph must stay acyclic (a
/// leaf may not depend on a replaced output), every new value must pass shape inference, and every
/// replaced output must keep its shape. Nodes under a run-time If's guard are not matched.
#pragma once
#include <algorithm>
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontend/ir/graph.h"
#include "frontend/subst/graph_cost.h"
#include "frontend/subst/rule.h"

namespace kiln::subst {

struct Match {
  std::map<std::string, std::string> leaves;  // leaf name -> the value bound to it
  std::vector<std::string> roots;             // the value each lhs output matched, in the rule's order
  std::vector<size_t> nodes;                  // the nodes the lhs's operators matched (Graph::nodes indices)
};

/// Every match of `rule`'s left-hand side in `g` (roots distinct), in node order.
std::vector<Match> find_matches(const Graph& g, const Rule& rule);

/// Who reads each value of a graph, and which values Slices make: what cost_change needs beyond
/// the match, made once per graph.
class GraphReaders {
 public:
  explicit GraphReaders(const Graph& g);
  /// Node inputs and graph outputs that read it.
  int count(const std::string& value) const {
    return static_cast<int>(nodes(value).size() + std::count(outputs_.begin(), outputs_.end(), value));
  }
  const std::vector<size_t>& nodes(const std::string& value) const;  // the nodes that read it
  bool made_by_slice(const std::string& value) const { return slice_outputs_.count(value) != 0; }
  const std::set<std::string>& slice_outputs() const { return slice_outputs_; }
  const std::set<std::string>& epilogue_values() const { return epilogue_values_; }
  /// Values computed from constants alone (values_of_constants): a rewrite that reads one reads a
  /// weight.
  const std::set<std::string>& constant_values() const { return constant_values_; }

 private:
  std::vector<std::string> outputs_;  // the graph's
  std::unordered_map<std::string, std::vector<size_t>> nodes_;
  std::set<std::string> slice_outputs_;
  std::set<std::string> epilogue_values_;
  std::set<std::string> constant_values_;
};
/// Every match of every rule, as (index into `rules`, match), by rule: one reading of `g` for all.
/// Matches whose outputs are all computed from constants alone are left out: they fold anyway.
std::vector<std::pair<size_t, Match>> find_all_matches(const Graph& g, const GraphReaders& readers,
                                                       const std::vector<Rule>& rules);

/// `g` with the match's roots computed by the rule's right-hand side instead (the roots keep their
/// names, so readers and graph outputs are untouched), the new nodes' shapes inferred and dead nodes
/// removed; nullopt when a check above fails. With `fold`, new nodes of constants are folded (a
/// concat of two weights becomes one weight); the search leaves them as nodes (graph_cost counts
/// them free) and folds only the graph it keeps, so that the graphs it holds share their weights.
std::optional<Graph> apply_match(const Graph& g, const Rule& rule, const Match& m, bool fold = true);

/// What applying the match would change in graph_cost(g, r) (seconds; negative: faster), from the
/// right-hand side's nodes alone (their shapes inferred on their own) and the matched nodes that
/// would die; nullopt when the right-hand side fails shape inference. The search ranks a rewrite
/// by it before paying for the rewritten graph.
std::optional<double> cost_change(const Graph& g, const GraphReaders& readers, const Rule& rule, const Match& m,
                                  const Roofline& r);

}  // namespace kiln::subst
