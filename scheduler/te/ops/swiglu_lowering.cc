// SwiGLU as a tensor expression: A * sigmoid(alpha * A) * B.
#include <functional>
#include <string>

#include "scheduler/te/ops/misc_family_lowering.h"

namespace kiln::te::misc {
namespace {

// Y = A * sigmoid(alpha * A) * B, computed in float32 for half types.
void lower_swiglu(LowerContext& c) {
  DType out = c.out_dtype(0), ct = compute_dtype(out);
  double alpha = c.node().attr_float("alpha", 1.0);
  const TensorRef& a = c.input(0);
  const TensorRef& b = c.input(1);
  c.set_output(0, compute(c.name(), "elementwise", out, c.out_shape(0), [&](const std::vector<Expr>& idx) {
    Expr g = cast(ct, at(a, idx));
    Expr gate = g * unary(ExprOp::Sigmoid, fimm(alpha, ct) * g);
    return cast(out, gate * cast(ct, at(b, idx)));
  }));
}

}  // namespace

void register_swiglu_lowering(LoweringRegistry& r) {
  r.add({"SwiGLU", "", lower_swiglu});
}

}  // namespace kiln::te::misc
