// Concat and Split: blocks of elements along one axis, copied whole.

#include "frontend/ops/shape_attributes.h"
#include "frontend/ops/shape_common.h"

namespace kiln::shape_family {
namespace {

Shape concat_shape(const Node& n, const std::vector<Shape>& ins, int64_t& axis) {
  if (ins.empty()) fail(n, "needs at least one input");
  int64_t r = static_cast<int64_t>(ins[0].size());
  if (r == 0) fail(n, "cannot concatenate scalars");
  axis = normalize_axis(n, n.required_int("axis"), r);
  Shape out = ins[0];
  for (size_t i = 1; i < ins.size(); ++i) {
    if (static_cast<int64_t>(ins[i].size()) != r) fail(n, "inputs have different ranks");
    for (int64_t a = 0; a < r; ++a)
      if (a != axis && ins[i][a] != out[a])
        fail(n, "input " + std::to_string(i) + " has shape " + shape_str(ins[i]) + ", incompatible with " +
                    shape_str(ins[0]) + " off axis " + std::to_string(axis));
    out[axis] += ins[i][axis];
  }
  return out;
}

OpDef concat_op() {
  OpDef d;
  d.op_type = "Concat";
  d.infer = [](InferContext& c) {
    std::vector<Shape> ins;
    for (size_t i = 0; i < c.num_inputs(); ++i) {
      c.require_input(i, "inputs");
      ins.push_back(c.shape(i));
    }
    int64_t axis = 0;
    c.set_output(0, same_dtype_inputs(c), concat_shape(c.node(), ins, axis));
  };
  d.eval = [](EvalContext& c) {
    std::vector<Shape> ins;
    for (size_t i = 0; i < c.num_inputs(); ++i) ins.push_back(c.input(i).shape());
    int64_t axis = 0;
    Shape out_shape = concat_shape(c.node(), ins, axis);
    Tensor out(c.input(0).dtype(), out_shape);
    int64_t rows = extent_product(out_shape, 0, axis);
    int64_t out_row = extent_product(out_shape, axis, out_shape.size());
    int64_t offset = 0;
    for (size_t i = 0; i < c.num_inputs(); ++i) {
      int64_t in_row = extent_product(ins[i], axis, ins[i].size());
      copy_blocks(out, offset, out_row, c.input(i), 0, in_row, rows, in_row);
      offset += in_row;
    }
    c.set_output(0, std::move(out));
  };
  return d;
}

OpDef split_op() {
  OpDef d;
  d.op_type = "Split";
  d.infer = [](InferContext& c) {
    c.require_input(0, "input");
    int64_t axis = normalize_axis(c.node(), c.node().attr_int("axis", 0), c.rank(0));
    std::vector<int64_t> sizes = split_sizes(c.node(), c.shape(0)[axis], int_inputs(c));
    for (size_t i = 0; i < sizes.size(); ++i) {
      Shape s = c.shape(0);
      s[axis] = sizes[i];
      c.set_output(i, c.dtype(0), s);
    }
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    int64_t axis = normalize_axis(c.node(), c.node().attr_int("axis", 0), x.rank());
    std::vector<int64_t> sizes = split_sizes(c.node(), x.shape()[axis], int_inputs(c));
    int64_t rows = extent_product(x.shape(), 0, axis);
    int64_t inner = extent_product(x.shape(), axis + 1, x.shape().size());
    int64_t in_row = x.shape()[axis] * inner;
    int64_t offset = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      Shape s = x.shape();
      s[axis] = sizes[i];
      Tensor part(x.dtype(), s);
      copy_blocks(part, 0, sizes[i] * inner, x, offset, in_row, rows, sizes[i] * inner);
      offset += sizes[i] * inner;
      c.set_output(i, std::move(part));
    }
  };
  return d;
}

}  // namespace

void register_concat_split_ops(OpRegistry& r) {
  r.add(concat_op());
  r.add(split_op());
}

}  // namespace kiln::shape_family
