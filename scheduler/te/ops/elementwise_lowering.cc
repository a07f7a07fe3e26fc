// Elementwise ops as tensor expressions.
#include "scheduler/te/ops/lowering_util.h"

namespace kiln::te {
namespace {

OpLowering unary_lowering(const std::string& op_type, std::function<Expr(const Expr&)> f) {
  return {op_type, "", [f](LowerContext& c) {
            c.set_output(0, broadcast_compute(c, "elementwise", c.out_dtype(0), c.out_shape(0),
                                              [&](const std::vector<Expr>& v) { return f(v[0]); }));
          }};
}

OpLowering binary_lowering(const std::string& op_type, ExprOp op) {
  return {op_type, "", [op](LowerContext& c) {
            c.set_output(0, broadcast_compute(c, "broadcast", c.out_dtype(0), c.out_shape(0),
                                              [&](const std::vector<Expr>& v) { return binary(op, v[0], v[1]); }));
          }};
}

}  // namespace

void register_elementwise_lowerings(LoweringRegistry& r) {
  r.add(unary_lowering("Relu", [](const Expr& x) { return max(x, const_of(x->dtype, 0)); }));
  r.add(binary_lowering("Add", ExprOp::Add));
}

}  // namespace kiln::te
