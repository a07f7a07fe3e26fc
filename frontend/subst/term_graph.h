/// \file Terms (term.h) evaluated: written as ONNX nodes and run by the reference interpreter.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "frontend/ir/graph.h"
#include "frontend/ir/tensor.h"
#include "frontend/subst/term.h"

namespace kiln::subst {

/// The values of `terms` for the leaf values `leaves` (every leaf of every term must have one), in
/// double precision. Throws Error naming the term when its operands do not fit the operator (shapes
/// that do not broadcast, a matmul's inner extents, ...), as ONNX shape inference reports them.
std::vector<Tensor> evaluate(const std::vector<TermRef>& terms, const std::map<std::string, Tensor>& leaves);

/// The graph evaluate() runs: one input per leaf (of `leaves`' dtypes and shapes), term i's value
/// copied to output "out<i>" by an Identity, shapes inferred. What a rewrite of a term is tried on.
Graph term_model(const std::vector<TermRef>& terms, const std::map<std::string, Tensor>& leaves);


}  // namespace kiln::subst
