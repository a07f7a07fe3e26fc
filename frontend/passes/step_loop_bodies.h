/// \file Passes over kiln.StepLoop nodes (frontend/ir/step_loop.h) and their bodies.
///
/// Why: a body is a graph of its own, so the graph passes (layouts, weight packing) run on it as on
/// the model; and the weights a body reads should be its constants, not values passed in, so that
/// those passes see them.
#pragma once
#include <functional>

#include "frontend/ir/graph.h"

namespace kiln {

/// Every invariant input of each StepLoop of `g` whose value is a constant becomes a constant of the
/// body, which is inferred again (folding what it makes constant); returns how many moved.
int sink_constant_invariants(Graph& g);

/// Replaces every StepLoop of `g` by its iterations (the body spliced once per iteration, the scan
/// outputs stacked by Concats) and infers shapes again; returns how many it replaced. For engines and
/// targets without loops (the te engine, GPU programs). Throws Unsupported when the iterations would
/// take `g` past kMaxExpandedNodes (splice_subgraph.h).
int unroll_step_loops(Graph& g);

/// Runs `pass` on a copy of every StepLoop body of `g` and puts the result in the body's place.
void rewrite_step_loop_bodies(Graph& g, const std::function<void(Graph&)>& pass);

}  // namespace kiln
