// SwiGLU: the gated activation A * sigmoid(alpha * A) * B.
#include <cmath>

#include "frontend/ops/misc_family.h"

namespace kiln::misc {
namespace {

double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

// Y = A * sigmoid(alpha * A) * B, with A and B of one shape (no broadcasting, per the spec).
OpDef swiglu_op() {
  OpDef d;
  d.op_type = "SwiGLU";
  d.infer = [](InferContext& c) {
    c.require_input(0, "A");
    c.require_input(1, "B");
    require_float_input(c, 0, "A");
    DType t = same_dtype_inputs(c);
    if (c.shape(0) != c.shape(1))
      c.fail("A and B must have the same shape, got " + shape_str(c.shape(0)) + " and " + shape_str(c.shape(1)));
    c.set_output(0, t, c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& a = c.input(0);
    const Tensor& b = c.input(1);
    double alpha = c.node().attr_float("alpha", 1.0);
    Tensor y(a.dtype(), a.shape());
    for (int64_t i = 0; i < a.size(); ++i) {
      double g = a.get_double(i);
      y.set_double(i, g * sigmoid(alpha * g) * b.get_double(i));
    }
    c.set_output(0, std::move(y));
  };
  // alpha * a, the sigmoid (exp, add, divide) and two products.
  d.flops = [](const NodeShapes& s) { return 6.0 * static_cast<double>(num_elements(s.out[0])); };
  return d;
}

}  // namespace

void register_swiglu_op(OpRegistry& r) {
  r.add(swiglu_op());
}

}  // namespace kiln::misc
