/// \file Shape inference with constant folding.
#pragma once
#include <cstdint>

#include "frontend/ir/graph.h"

namespace kiln {

/// Gives every value of the graph a dtype and a static shape, in topological order, with each op's own
/// inference rule (frontend/ops). Folding is part of the same walk, not a separate pass, because
/// shapes depend on folded values: transformer exports compute Reshape targets through
/// Shape -> Gather -> Concat chains, so a node whose inputs are all known is evaluated with the
/// reference kernel and its outputs become constants before later nodes are inferred.
/// An If is replaced by its branch on the way when its condition folds to a constant, by both
/// branches, guarded, when it does not (inline_if.h). Requires bound graph inputs
/// (bind_input_shapes). Throws Error naming the node on failure.
struct InferOptions {
  /// Infer only the nodes with an untyped output (a rewrite's new nodes; the rest keep their types).
  bool only_untyped = false;
  /// Fold nodes with all-constant inputs only up to this many output elements (the substitution
  /// search leaves a concat of two weights as a node until it has chosen its graph).
  int64_t max_fold_elements = INT64_MAX;
};
void infer_shapes(Graph& g, const InferOptions& o = {});

}  // namespace kiln
