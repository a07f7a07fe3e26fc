/// \file Direct evaluation of tensor expressions, to check op lowerings against the reference.
#pragma once
#include <map>
#include <vector>

#include "scheduler/te/compute.h"

namespace kiln::te {

/// Evaluates every stage of a DAG element by element (double for floats, int64 for integers, each
/// stage's result rounded to its dtype, as the reference interpreter does). Extern stages run the
/// op's reference kernel. Slow by design: it checks lowerings, it does not run models.
/// `inputs` gives the values of the non-constant placeholders.
std::vector<Tensor> evaluate(const ComputeDAG& dag, const std::map<const TensorNode*, Tensor>& inputs);

}  // namespace kiln::te
