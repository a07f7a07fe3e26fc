/// \file A stage's computation as its loop nest sees it: loads of inlined stages replaced by their
/// bodies, and every loop variable of the stage (roots included) as an expression of its current loops.
#pragma once
#include <map>
#include <vector>

#include "scheduler/state/state.h"

namespace kiln::state {

/// Replaces loads of inlined stages by the inlined stage's body at the loaded indices, recursively.
/// One Inliner per state: it caches each inlined stage's own expansion.
class Inliner {
 public:
  explicit Inliner(const State& s);
  te::Expr expand(const te::Expr& e);

 private:
  const State& s_;
  std::map<const te::TensorNode*, int> stage_of_;
  std::map<int, te::Expr> expanded_body_;
};

/// Values of every node of `st` (index = node id) in terms of `node_vars` of its current loops: a split's
/// parent is its parts recombined, a fused loop's inputs are divided out of it. Extents are the
/// stage's current node extents (after bound inference for an attached stage).
std::vector<te::Expr> node_values(const Stage& st, const std::vector<te::Expr>& node_vars);

/// Fresh loop variables for every node of every stage, named after the nodes.
std::vector<std::vector<te::Expr>> make_node_vars(const State& s);

/// Stage ids that read `stage` (looking through inlined stages), in order.
std::vector<int> consumers_through_inlined(const State& s, int stage);

}  // namespace kiln::state
