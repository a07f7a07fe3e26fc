// kiln.IfMerge(cond, then_value, else_value): an output of an If whose condition is known only at run
// time (frontend/passes/inline_if.h), or a value a Loop carries past an iteration its condition
// decides (unroll_loops.h), is the value of the side the condition names. Attribute "if" is the
// label of that If or Loop, so a disagreement between the sides is reported against it.
#include "frontend/ops/misc_family.h"

namespace kiln::misc {
namespace {

OpDef if_merge_op() {
  OpDef d;
  d.op_type = "IfMerge";
  d.domain = "kiln";
  d.infer = [](InferContext& c) {
    for (size_t i = 0; i < 3; ++i) c.require_input(i, i == 0 ? "cond" : i == 1 ? "then_value" : "else_value");
    const std::string where = c.node().attr_string("if", c.node().label()) + ": output '" + c.node().outputs[0] + "'";
    if (c.dtype(0) != DType::Bool || num_elements(c.shape(0)) != 1)
      throw Error(where + ": the condition must be one bool, got " + dtype_name(c.dtype(0)) + " " + shape_str(c.shape(0)));
    if (c.dtype(1) != c.dtype(2) || c.shape(1) != c.shape(2))
      throw Error(where + ": the two sides give " + dtype_name(c.dtype(1)) + " " + shape_str(c.shape(1)) + " and " +
                  dtype_name(c.dtype(2)) + " " + shape_str(c.shape(2)) +
                  "; compiled code needs one type per value (freeze the condition's inputs to fold the If)");
    c.set_output(0, c.dtype(1), c.shape(1));
  };
  d.eval = [](EvalContext& c) { c.set_output(0, c.input(0).get_double(0) != 0 ? c.input(1) : c.input(2)); };
  return d;
}

}  // namespace

void register_if_merge_op(OpRegistry& r) {
  r.add(if_merge_op());
}

}  // namespace kiln::misc
