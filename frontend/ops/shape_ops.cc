// The shape family's entry point, and the ops that change only a tensor's shape, never its elements:
// Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout. The family's other files:
// generated_tensor_ops.cc (Constant, ConstantOfShape, EyeLike, Range), expand_tile_transpose_ops.cc,
// concat_split_ops.cc, shape_index_ops.cc (Slice, Gather*, Scatter*, ...) and shape_layout_ops.cc (Pad,
// Depth/SpaceToDepth, Trilu, ...).
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
  d.takes_narrow_types = true;
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
  d.takes_narrow_types = true;
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

// ---- Identity, Dropout ------------------------------------------------------------------------------

OpDef identity_op() {
  OpDef d;
  d.op_type = "Identity";
  d.infer = [](InferContext& c) {
    c.require_input(0, "input");
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [](EvalContext& c) { c.set_output(0, c.input(0)); };
  d.takes_narrow_types = true;
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
  shape_family::register_generated_tensor_ops(r);
  shape_family::register_expand_tile_transpose_ops(r);
  shape_family::register_concat_split_ops(r);
  shape_family::register_shape_index_ops(r);
  shape_family::register_shape_layout_ops(r);
}

}  // namespace kiln
