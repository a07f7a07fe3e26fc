// Shape plumbing and whole-tensor data movement: Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze,
// Identity, Dropout, Constant, ConstantOfShape, EyeLike, Range, Expand, Tile, Transpose, Concat, Split.
// Indexing ops live in shape_index_ops.cc, padding/layout/scan ops in shape_layout_ops.cc.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "frontend/ops/shape_attributes.h"
#include "frontend/ops/shape_common.h"

namespace kiln {
namespace {
using namespace shape_family;

// ---- Shape, Size -------------------------------------------------------------------------------------

OpDef shape_op() {
  OpDef d;
  d.op_type = "Shape";
  d.infer = [](InferContext& c) { c.set_output_constant(0, shape_op_value(c.node(), c.shape(0))); };
  d.eval = [](EvalContext& c) { c.set_output(0, shape_op_value(c.node(), c.input(0).shape())); };
  return d;
}

OpDef size_op() {
  OpDef d;
  d.op_type = "Size";
  d.infer = [](InferContext& c) { c.set_output_constant(0, Tensor::scalar_int(DType::Int64, num_elements(c.shape(0)))); };
  d.eval = [](EvalContext& c) { c.set_output(0, Tensor::scalar_int(DType::Int64, c.input(0).size())); };
  return d;
}

// ---- Reshape, Flatten, Squeeze, Unsqueeze: new shape, same bytes ---------------------------------------

// Reshape's target: 0 copies the input extent (unless allowzero), -1 is inferred.
Shape reshape_target(const Node& node, const Shape& in, const std::vector<int64_t>& spec) {
  bool allowzero = node.attr_int("allowzero", 0) != 0;
  Shape out(spec.size());
  int64_t infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == -1) {
      if (infer_at >= 0) fail(node, "more than one -1 in the target shape");
      infer_at = static_cast<int64_t>(i);
      continue;
    }
    if (d == 0 && !allowzero) {
      if (i >= in.size()) fail(node, "0 in the target shape at an axis the input lacks");
      d = in[i];
    }
    if (d < 0) fail(node, "invalid extent " + std::to_string(d) + " in the target shape");
    out[i] = d;
    known *= d;
  }
  int64_t total = num_elements(in);
  if (infer_at >= 0) {
    // With allowzero a literal 0 next to -1 leaves the -1 undetermined; the spec forbids it.
    if (known == 0 || total % known != 0) fail(node, "cannot reshape " + shape_str(in) + " to the target shape");
    out[infer_at] = total / known;
  } else if (known != total) {
    fail(node, "cannot reshape " + shape_str(in) + " to " + shape_str(out));
  }
  return out;
}

OpDef reshape_op() {
  OpDef d;
  d.op_type = "Reshape";
  d.infer = [](InferContext& c) {
    c.require_input(0, "data");
    std::vector<int64_t> spec;
    if (c.opset() < 5) {
      spec = c.node().required_ints("shape");
    } else {
      c.require_input(1, "shape");
      require_integer_input(c, 1, "shape");
      if (c.rank(1) != 1) c.fail("the shape input must be 1-D, got " + shape_str(c.shape(1)));
      spec = tensor_ints(c.require_constant(1, "shape"));
    }
    c.set_output(0, c.dtype(0), reshape_target(c.node(), c.shape(0), spec));
  };
  d.eval = [](EvalContext& c) {
    std::vector<int64_t> spec = c.opset() < 5 ? c.node().required_ints("shape") : tensor_ints(c.input(1));
    c.set_output(0, c.input(0).reshaped(reshape_target(c.node(), c.input(0).shape(), spec)));
  };
  return d;
}

Shape flatten_shape(const Node& node, const Shape& in) {
  int64_t r = static_cast<int64_t>(in.size());
  int64_t axis = node.attr_int("axis", 1);
  if (axis < -r || axis > r) fail(node, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  if (axis < 0) axis += r;
  return {extent_product(in, 0, axis), extent_product(in, axis, in.size())};
}

// Squeeze's axes: an attribute before opset 13, an optional input after; none means every 1.
Shape squeeze_shape(const Node& node, const Shape& in, const std::vector<int64_t>* axes_given) {
  int64_t r = static_cast<int64_t>(in.size());
  std::vector<bool> drop(in.size(), false);
  if (axes_given) {
    for (int64_t a : normalize_axes(node, *axes_given, r)) {
      if (in[a] != 1) fail(node, "cannot squeeze axis " + std::to_string(a) + " of extent " + std::to_string(in[a]));
      drop[a] = true;
    }
  } else {
    for (size_t i = 0; i < in.size(); ++i) drop[i] = in[i] == 1;
  }
  Shape out;
  for (size_t i = 0; i < in.size(); ++i)
    if (!drop[i]) out.push_back(in[i]);
  return out;
}

Shape unsqueeze_shape(const Node& node, const Shape& in, const std::vector<int64_t>& axes) {
  int64_t out_rank = static_cast<int64_t>(in.size() + axes.size());
  std::vector<bool> inserted(out_rank, false);
  for (int64_t a : normalize_axes(node, axes, out_rank)) {
    if (inserted[a]) fail(node, "axis " + std::to_string(a) + " is given twice");
    inserted[a] = true;
  }
  Shape out(out_rank, 1);
  size_t next = 0;
  for (int64_t i = 0; i < out_rank; ++i)
    if (!inserted[i]) out[i] = in[next++];
  return out;
}

// A node's axes: an attribute before opset `input_since`, input `input` from then on; nullopt when absent.
template <typename Ctx>
std::optional<std::vector<int64_t>> axes_of(const Ctx& c, int64_t input_since, size_t input) {
  if (c.opset() >= input_since) return int_input_values(c, input, "axes");
  if (!c.node().has_attr("axes")) return std::nullopt;
  return c.node().attr_ints("axes");
}

// An op whose output is input 0's bytes under a shape computed from the node and (for eval) its inputs.
template <typename ShapeFn>
OpDef reshaping_op(std::string name, ShapeFn out_shape) {
  OpDef d;
  d.op_type = std::move(name);
  d.infer = [out_shape](InferContext& c) {
    c.require_input(0, "data");
    c.set_output(0, c.dtype(0), out_shape(c, c.shape(0)));
  };
  d.eval = [out_shape](EvalContext& c) { c.set_output(0, c.input(0).reshaped(out_shape(c, c.input(0).shape()))); };
  return d;
}

OpDef flatten_op() {
  return reshaping_op("Flatten", [](const auto& c, const Shape& in) { return flatten_shape(c.node(), in); });
}

OpDef squeeze_op() {
  return reshaping_op("Squeeze", [](const auto& c, const Shape& in) {
    auto axes = axes_of(c, 13, 1);
    return squeeze_shape(c.node(), in, axes ? &*axes : nullptr);
  });
}

OpDef unsqueeze_op() {
  return reshaping_op("Unsqueeze", [](const auto& c, const Shape& in) {
    auto axes = axes_of(c, 13, 1);
    if (!axes) fail(c.node(), "missing axes");
    return unsqueeze_shape(c.node(), in, *axes);
  });
}

// ---- Identity, Dropout, Constant ------------------------------------------------------------------------

OpDef identity_op() {
  OpDef d;
  d.op_type = "Identity";
  d.infer = [](InferContext& c) {
    c.require_input(0, "input");
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [](EvalContext& c) { c.set_output(0, c.input(0)); };
  return d;
}

// Dropout is the identity at inference. Training mode (opset 12+, input 2) with a nonzero ratio
// draws random masks, which a deterministic compiler cannot reproduce.
OpDef dropout_op() {
  OpDef d;
  d.op_type = "Dropout";
  d.infer = [](InferContext& c) {
    c.require_input(0, "data");
    if (c.opset() >= 12 && c.has_input(2)) {
      bool training = c.require_constant(2, "training_mode").get_int(0) != 0;
      if (training && (!c.has_input(1) || c.require_constant(1, "ratio").get_double(0) > 0))
        c.unsupported("training mode with a nonzero ratio is random");
    }
    c.set_output(0, c.dtype(0), c.shape(0));
    // The mask was the data's dtype until opset 10 made it bool.
    c.set_output(1, c.opset() < 10 ? c.dtype(0) : DType::Bool, c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    c.set_output(0, x);
    if (c.has_output(1)) {
      Tensor mask(c.opset() < 10 ? x.dtype() : DType::Bool, x.shape());
      for (int64_t i = 0; i < mask.size(); ++i) mask.set_int(i, 1);
      c.set_output(1, std::move(mask));
    }
  };
  return d;
}

OpDef constant_op() {
  OpDef d;
  d.op_type = "Constant";
  d.infer = [](InferContext& c) { c.set_output_constant(0, constant_value(c.node())); };
  d.eval = [](EvalContext& c) { c.set_output(0, constant_value(c.node())); };
  return d;
}

// ---- ConstantOfShape, EyeLike, Range: generated tensors ---------------------------------------------------

Shape shape_from_values(const Node& n, const std::vector<int64_t>& dims) {
  for (int64_t d : dims)
    if (d < 0) fail(n, "negative extent " + std::to_string(d) + " in the shape input");
  return dims;
}

OpDef constant_of_shape_op() {
  OpDef d;
  d.op_type = "ConstantOfShape";
  d.infer = [](InferContext& c) {
    c.require_input(0, "shape");
    require_integer_input(c, 0, "shape");
    if (c.rank(0) != 1) c.fail("the shape input must be 1-D, got " + shape_str(c.shape(0)));
    Tensor fill = constant_of_shape_fill(c.node());
    c.set_output(0, fill.dtype(), shape_from_values(c.node(), tensor_ints(c.require_constant(0, "shape"))));
  };
  d.eval = [](EvalContext& c) {
    Tensor fill = constant_of_shape_fill(c.node());
    Shape s = shape_from_values(c.node(), tensor_ints(c.input(0)));
    c.set_output(0, gather_by_map(fill, s, std::vector<int64_t>(num_elements(s), 0)));
  };
  return d;
}

DType eyelike_dtype(const Node& n, DType input) {
  if (!n.has_attr("dtype")) return input;
  DType t = dtype_from_int(static_cast<int32_t>(n.attr_int("dtype", 0)));
  if (!is_supported(t)) throw Unsupported(n.label() + ": dtype " + dtype_name(t) + " is not supported");
  return t;
}

OpDef eyelike_op() {
  OpDef d;
  d.op_type = "EyeLike";
  d.infer = [](InferContext& c) {
    c.require_input(0, "input");
    if (c.rank(0) != 2) c.fail("input must be 2-D, got " + shape_str(c.shape(0)));
    c.set_output(0, eyelike_dtype(c.node(), c.dtype(0)), c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Shape& s = c.input(0).shape();
    int64_t k = c.node().attr_int("k", 0);
    Tensor y(eyelike_dtype(c.node(), c.input(0).dtype()), s);
    for (int64_t i = 0; i < s[0]; ++i)
      if (i + k >= 0 && i + k < s[1]) y.set_int(i * s[1] + i + k, 1);
    c.set_output(0, std::move(y));
  };
  return d;
}

// Range's element count: max(ceil((limit - start) / delta), 0), exact for integers.
int64_t range_count(const Node& n, const Tensor& start, const Tensor& limit, const Tensor& delta) {
  constexpr int64_t kMaxRange = int64_t{1} << 32;
  double count;
  if (is_float(start.dtype())) {
    double s = start.get_double(0), l = limit.get_double(0), dl = delta.get_double(0);
    if (dl == 0 || !std::isfinite(s) || !std::isfinite(l) || !std::isfinite(dl))
      fail(n, "start, limit and delta must be finite and delta nonzero");
    count = std::max(std::ceil((l - s) / dl), 0.0);
  } else {
    int64_t s = start.get_int(0), l = limit.get_int(0), dl = delta.get_int(0);
    if (dl == 0) fail(n, "delta must be nonzero");
    // Long double keeps int64 differences exact enough for any count that fits in memory.
    long double diff = static_cast<long double>(l) - static_cast<long double>(s);
    count = static_cast<double>(std::max<long double>(std::ceil(diff / static_cast<long double>(dl)), 0.0L));
  }
  if (count > static_cast<double>(kMaxRange)) fail(n, "range of " + std::to_string(count) + " elements is too large");
  return static_cast<int64_t>(count);
}

OpDef range_op() {
  OpDef d;
  d.op_type = "Range";
  d.infer = [](InferContext& c) {
    for (size_t i = 0; i < 3; ++i) {
      c.require_input(i, i == 0 ? "start" : i == 1 ? "limit" : "delta");
      if (c.rank(i) != 0 && num_elements(c.shape(i)) != 1) c.fail("start, limit and delta must be scalars");
    }
    DType t = same_dtype_inputs(c);
    if (t == DType::Bool) c.unsupported("Range on bool is not supported");
    int64_t n = range_count(c.node(), c.require_constant(0, "start"), c.require_constant(1, "limit"),
                            c.require_constant(2, "delta"));
    c.set_output(0, t, {n});
  };
  d.eval = [](EvalContext& c) {
    const Tensor &start = c.input(0), &limit = c.input(1), &delta = c.input(2);
    int64_t n = range_count(c.node(), start, limit, delta);
    Tensor y(start.dtype(), {n});
    for (int64_t i = 0; i < n; ++i) {
      if (y.is_float_dtype()) y.set_double(i, start.get_double(0) + static_cast<double>(i) * delta.get_double(0));
      else y.set_int(i, static_cast<int64_t>(static_cast<uint64_t>(start.get_int(0)) +
                                             static_cast<uint64_t>(i) * static_cast<uint64_t>(delta.get_int(0))));
    }
    c.set_output(0, std::move(y));
  };
  d.flops = flops_per_output_element;  // one add per element (the multiply is an index)
  return d;
}

// ---- Expand, Tile, Transpose: index maps --------------------------------------------------------------

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

// ---- Concat, Split: blocks along one axis ---------------------------------------------------------------

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

void register_shape_ops(OpRegistry& r) {
  r.add(shape_op());
  r.add(size_op());
  r.add(reshape_op());
  r.add(flatten_op());
  r.add(squeeze_op());
  r.add(unsqueeze_op());
  r.add(identity_op());
  r.add(dropout_op());
  r.add(constant_op());
  r.add(constant_of_shape_op());
  r.add(eyelike_op());
  r.add(range_op());
  r.add(expand_op());
  r.add(tile_op());
  r.add(transpose_op());
  r.add(concat_op());
  r.add(split_op());
  shape_family::register_shape_index_ops(r);
  shape_family::register_shape_layout_ops(r);
}

}  // namespace kiln
