// Expand, Tile and Transpose: each output element reads one input element through an index map.

#include "frontend/ops/shape_attributes.h"
#include "frontend/ops/shape_common.h"

namespace kiln::shape_family {
namespace {

Shape expand_shape(const Node& n, const Shape& in, const std::vector<int64_t>& target) {
  for (int64_t t : target)
    if (t < 0) fail(n, "negative extent " + std::to_string(t) + " in the shape input");
  auto out = broadcast(in, target);
  if (!out) fail(n, "input shape " + shape_str(in) + " does not broadcast to " + shape_str(target));
  return *out;
}

OpDef expand_op() {
  OpDef d;
  d.op_type = "Expand";
  d.infer = [](InferContext& c) {
    c.require_input(0, "input");
    c.require_input(1, "shape");
    require_integer_input(c, 1, "shape");
    c.set_output(0, c.dtype(0), expand_shape(c.node(), c.shape(0), tensor_ints(c.require_constant(1, "shape"))));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    Shape out = expand_shape(c.node(), x.shape(), tensor_ints(c.input(1)));
    c.set_output(0, gather_by_map(x, out, broadcast_index_map(out, x.shape())));
  };
  return d;
}

Shape tile_shape(const Node& n, const Shape& in, const std::vector<int64_t>& repeats) {
  if (repeats.size() != in.size())
    fail(n, "repeats has " + std::to_string(repeats.size()) + " entries for rank " + std::to_string(in.size()));
  Shape out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (repeats[i] < 0) fail(n, "negative repeat " + std::to_string(repeats[i]));
    out[i] = in[i] * repeats[i];
  }
  return out;
}

OpDef tile_op() {
  OpDef d;
  d.op_type = "Tile";
  d.infer = [](InferContext& c) {
    c.require_input(0, "input");
    c.require_input(1, "repeats");
    require_integer_input(c, 1, "repeats");
    c.set_output(0, c.dtype(0), tile_shape(c.node(), c.shape(0), tensor_ints(c.require_constant(1, "repeats"))));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    Shape out = tile_shape(c.node(), x.shape(), tensor_ints(c.input(1)));
    std::vector<int64_t> in_strides = strides_of(x.shape());
    std::vector<int64_t> map(num_elements(out));
    for_each_index(out, [&](const std::vector<int64_t>& idx, int64_t flat) {
      int64_t src = 0;
      for (size_t a = 0; a < idx.size(); ++a) src += (idx[a] % x.shape()[a]) * in_strides[a];
      map[flat] = src;
    });
    c.set_output(0, gather_by_map(x, out, map));
  };
  return d;
}

OpDef transpose_op() {
  OpDef d;
  d.op_type = "Transpose";
  d.infer = [](InferContext& c) {
    c.require_input(0, "data");
    std::vector<int64_t> perm = transpose_perm(c.node(), c.rank(0));
    Shape out;
    for (int64_t p : perm) out.push_back(c.shape(0)[p]);
    c.set_output(0, c.dtype(0), out);
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    std::vector<int64_t> perm = transpose_perm(c.node(), x.rank());
    std::vector<int64_t> in_strides = strides_of(x.shape());
    Shape out;
    std::vector<int64_t> strides;  // input stride of each output axis
    for (int64_t p : perm) {
      out.push_back(x.shape()[p]);
      strides.push_back(in_strides[p]);
    }
    std::vector<int64_t> map(num_elements(out));
    for_each_index(out, [&](const std::vector<int64_t>& idx, int64_t flat) {
      int64_t src = 0;
      for (size_t a = 0; a < idx.size(); ++a) src += idx[a] * strides[a];
      map[flat] = src;
    });
    c.set_output(0, gather_by_map(x, out, map));
  };
  return d;
}

}  // namespace

void register_expand_tile_transpose_ops(OpRegistry& r) {
  r.add(expand_op());
  r.add(tile_op());
  r.add(transpose_op());
}

}  // namespace kiln::shape_family
