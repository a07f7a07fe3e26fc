/// \file The reference interpreter: the oracle every other engine is compared against.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "frontend/ir/graph.h"

namespace kiln {

/// Evaluates a shape-inferred graph node by node with the ops' reference kernels (frontend/ops),
/// which compute in double (int64 for integers) and round to each output's dtype. Clarity over speed.
/// Inputs are matched by graph input name and must have the bound dtype and shape; the result holds
/// the graph outputs in declaration order. Every kernel result is checked against the inferred dtype
/// and shape, so shape inference is tested by every run.
std::vector<Tensor> run_reference(const Graph& g, const std::map<std::string, Tensor>& inputs);

}  // namespace kiln
