/// \file Lowering a node through a graph rewrite that replaces it by ordinary nodes.
///
/// Why: LSTM/GRU/RNN (expand_recurrent.h) and kiln.StepLoop (step_loop_bodies.h) are compiled by
/// rewriting the graph; the te engine, which lowers a graph node by node, lowers them through the same
/// rewrite, so both compute the same thing and no second formulation exists.
#pragma once
#include <functional>

#include "frontend/ir/graph.h"
#include "scheduler/te/op_lowering.h"

namespace kiln::te {

/// Lowers c's node by putting it alone in a graph (its inputs typed, constant inputs kept, so their
/// work folds), applying `rewrite` to that graph, and lowering the nodes it leaves.
void lower_through_rewrite(LowerContext& c, const std::function<void(Graph&)>& rewrite);

}  // namespace kiln::te
