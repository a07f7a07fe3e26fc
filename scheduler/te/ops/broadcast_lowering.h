/// \file Numpy broadcasting in tensor expressions, shared by the op lowering files: the input indices an
/// output index reads, and a stage computing a function of every input over their broadcast shape.
#pragma once
#include <vector>

#include "scheduler/te/op_lowering.h"

namespace kiln::te {

/// The indices into `in` that numpy broadcasting maps output indices `idx` (of shape `out`) to.
std::vector<Expr> broadcast_indices(const std::vector<Expr>& idx, const Shape& out, const Shape& in);

/// A stage computing f(x0, x1, ...) elementwise over the broadcast of all present inputs, in `dtype`.
TensorRef broadcast_compute(LowerContext& c, const std::string& tag, DType dtype, const Shape& out_shape,
                            const std::function<Expr(const std::vector<Expr>& values)>& f);

}  // namespace kiln::te
