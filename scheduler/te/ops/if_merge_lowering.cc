// kiln.IfMerge as a tensor expression: the then-value where the condition holds, else the else-value.
// Only the chosen value is read (select), so the branch that did not run is never looked at.
#include "scheduler/te/ops/misc_family_lowering.h"

namespace kiln::te::misc {
namespace {

void lower_if_merge(LowerContext& c) {
  const TensorRef &cond = c.input(0), &then_value = c.input(1), &else_value = c.input(2);
  const std::vector<Expr> first(cond->shape.size(), int_imm(0));
  c.set_output(0, compute(c.name(), "broadcast", c.out_dtype(0), c.out_shape(0), [&](const std::vector<Expr>& idx) {
    return select(load(cond, first), load(then_value, idx), load(else_value, idx));
  }));
}

}  // namespace

void register_if_merge_lowering(LoweringRegistry& r) {
  r.add({"IfMerge", "kiln", lower_if_merge});
}

}  // namespace kiln::te::misc
