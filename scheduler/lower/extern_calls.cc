#include "scheduler/lower/extern_calls.h"

#include <cstring>

#include "frontend/ir/error.h"
#include "frontend/ops/axes_and_broadcast.h"

namespace kiln::lower {
namespace {

using te::TensorRef;

// The pieces every spec needs: buffers by tensor (null stays null) and a present output's shape.
struct CallContext {
  const Node& node;
  const std::vector<TensorRef>& inputs;
  const std::vector<TensorRef>& outputs;
  const std::map<const te::TensorNode*, BufferRef>& buffers;

  const TensorRef& input(size_t i) const {
    if (i >= inputs.size() || !inputs[i]) throw Error(node.label() + ": extern call without input " + std::to_string(i));
    return inputs[i];
  }
  BufferRef buffer(const TensorRef& t) const { return t ? buffers.at(t.get()) : nullptr; }
  BufferRef output_buffer(size_t i) const { return i < outputs.size() ? buffer(outputs[i]) : nullptr; }
  // Outputs that share a shape (TopK's values and indices): whichever the DAG has.
  const TensorRef& any_output() const {
    for (const TensorRef& t : outputs)
      if (t) return t;
    throw Error(node.label() + ": extern call with no output");
  }
};

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

// TopK over X viewed as [outer, extent, inner]; k is the output's extent on the axis, which shape
// inference already took from the (constant) K input or the attribute.
ExternCallSpec topk_call(const CallContext& c) {
  const TensorRef& x = c.input(0);
  if (!is_supported(x->dtype) || dtype_size(x->dtype) == 0)
    throw Unsupported(c.node.label() + ": TopK of " + dtype_name(x->dtype) + " has no runtime kernel");
  const int64_t rank = static_cast<int64_t>(x->shape.size());
  const auto axis = static_cast<size_t>(normalize_axis(c.node, c.node.attr_int("axis", -1), rank));
  const int64_t k = c.any_output()->shape[axis];
  ExternCallSpec s;
  s.callee = "kiln_rt_topk";
  s.args = {c.buffer(x), c.output_buffer(0), c.output_buffer(1)};
  s.int_args = {static_cast<int64_t>(x->dtype), product(x->shape, 0, axis), x->shape[axis],
                product(x->shape, axis + 1, x->shape.size()), k, c.node.attr_int("largest", 1) != 0 ? 1 : 0};
  s.takes_scratch = true;
  s.scratch_bytes = k * static_cast<int64_t>(sizeof(int64_t));  // the row's heap of positions
  return s;
}

// Det of [..., n, n]: one determinant per leading index.
ExternCallSpec det_call(const CallContext& c) {
  const TensorRef& x = c.input(0);
  if (x->dtype != DType::Float32 && x->dtype != DType::Float64)
    throw Unsupported(c.node.label() + ": Det of " + dtype_name(x->dtype) + " has no runtime kernel (float32, float64)");
  const int64_t n = x->shape.back();
  ExternCallSpec s;
  s.callee = "kiln_rt_det";
  s.args = {c.buffer(x), c.output_buffer(0)};
  s.int_args = {static_cast<int64_t>(x->dtype), product(x->shape, 0, x->shape.size() - 2), n};
  s.takes_scratch = true;
  s.scratch_bytes = n * n * static_cast<int64_t>(sizeof(double));  // the matrix being eliminated
  return s;
}

// BitCast keeps the byte count: a copy of the input's bytes.
ExternCallSpec bitcast_call(const CallContext& c) {
  const TensorRef& x = c.input(0);
  ExternCallSpec s;
  s.callee = "kiln_rt_bitcast";
  s.args = {c.buffer(x), c.output_buffer(0)};
  s.int_args = {num_elements(x->shape) * static_cast<int64_t>(dtype_size(x->dtype))};
  return s;
}

// kiln.NonMaxSuppressionBounded: float32 boxes and scores; the optional scalars by pointer, null when
// absent or empty (max_output_boxes_per_class then keeps none, as the reference does).
ExternCallSpec nms_call(const CallContext& c) {
  const TensorRef& boxes = c.input(0);
  const TensorRef& scores = c.input(1);
  if (boxes->dtype != DType::Float32 || scores->dtype != DType::Float32)
    throw Unsupported(c.node.label() + ": NonMaxSuppression of " + dtype_name(boxes->dtype) + " has no runtime kernel (float32)");
  auto scalar = [&](size_t i) -> BufferRef {
    if (i >= c.inputs.size() || !c.inputs[i] || num_elements(c.inputs[i]->shape) == 0) return nullptr;
    return c.buffer(c.inputs[i]);
  };
  if (c.inputs.size() > 3 && c.inputs[3] && c.inputs[3]->dtype != DType::Float32)
    throw Unsupported(c.node.label() + ": an iou_threshold of " + dtype_name(c.inputs[3]->dtype) + " has no runtime kernel");
  if (c.inputs.size() > 4 && c.inputs[4] && c.inputs[4]->dtype != DType::Float32)
    throw Unsupported(c.node.label() + ": a score_threshold of " + dtype_name(c.inputs[4]->dtype) + " has no runtime kernel");
  ExternCallSpec s;
  s.callee = "kiln_rt_nms";
  s.args = {c.buffer(boxes), c.buffer(scores), scalar(2), scalar(3), scalar(4), c.output_buffer(0), c.output_buffer(1)};
  const int64_t num_boxes = boxes->shape[1];
  s.int_args = {boxes->shape[0], scores->shape[1], num_boxes, c.node.attr_int("center_point_box", 0),
                c.node.required_int("bound")};
  s.takes_scratch = true;
  s.scratch_bytes = 2 * num_boxes * static_cast<int64_t>(sizeof(int64_t));  // candidates, then the boxes kept
  return s;
}

// kiln.NonZeroBounded: the input's dims as eight integers (a scalar is one element of rank 1).
ExternCallSpec nonzero_call(const CallContext& c) {
  const TensorRef& x = c.input(0);
  if (x->shape.size() > 8) throw Unsupported(c.node.label() + ": NonZero of rank " + std::to_string(x->shape.size()) + " (at most 8)");
  if (!is_supported(x->dtype) || dtype_size(x->dtype) == 0)
    throw Unsupported(c.node.label() + ": NonZero of " + dtype_name(x->dtype) + " has no runtime kernel");
  Shape dims = x->shape.empty() ? Shape{1} : x->shape;
  ExternCallSpec s;
  s.callee = "kiln_rt_nonzero";
  s.args = {c.buffer(x), c.output_buffer(0), c.output_buffer(1)};
  s.int_args = {static_cast<int64_t>(x->dtype), num_elements(dims), static_cast<int64_t>(dims.size())};
  for (size_t a = 0; a < 8; ++a) s.int_args.push_back(a < dims.size() ? dims[a] : 1);
  return s;
}

// kiln.UniqueBounded: the input as [outer, slices, inner] around the axis (flat when there is none).
ExternCallSpec unique_call(const CallContext& c) {
  const TensorRef& x = c.input(0);
  if (!is_supported(x->dtype) || dtype_size(x->dtype) == 0)
    throw Unsupported(c.node.label() + ": Unique of " + dtype_name(x->dtype) + " has no runtime kernel");
  int64_t outer = 1, slices = num_elements(x->shape), inner = 1;
  if (c.node.has_attr("axis")) {
    const auto axis = static_cast<size_t>(normalize_axis(c.node, c.node.attr_int("axis", 0), static_cast<int64_t>(x->shape.size())));
    outer = product(x->shape, 0, axis);
    slices = x->shape[axis];
    inner = product(x->shape, axis + 1, x->shape.size());
  }
  ExternCallSpec s;
  s.callee = "kiln_rt_unique";
  s.args = {c.buffer(x)};
  for (size_t i = 0; i < 5; ++i) s.args.push_back(c.output_buffer(i));
  s.int_args = {static_cast<int64_t>(x->dtype), outer, slices, inner, c.node.attr_int("sorted", 1) != 0 ? 1 : 0};
  s.takes_scratch = true;
  s.scratch_bytes = 4 * slices * static_cast<int64_t>(sizeof(int64_t));  // order, first, runs, rank
  return s;
}

// RoiAlign whose sample grid depends on run-time ROIs (te's lowering makes it an extern stage then).
ExternCallSpec roialign_call(const CallContext& c) {
  const TensorRef& x = c.input(0);
  const TensorRef& rois = c.input(1);
  const TensorRef& batch_indices = c.input(2);
  if ((x->dtype != DType::Float32 && x->dtype != DType::Float64) || rois->dtype != x->dtype)
    throw Unsupported(c.node.label() + ": RoiAlign of " + dtype_name(x->dtype) + " has no runtime kernel (float32, float64)");
  if (batch_indices->dtype != DType::Int64 && batch_indices->dtype != DType::Int32)
    throw Unsupported(c.node.label() + ": batch_indices of " + dtype_name(batch_indices->dtype) + " has no runtime kernel");
  const std::string mode = c.node.attr_string("coordinate_transformation_mode", c.node.opset >= 16 ? "half_pixel" : "output_half_pixel");
  const double scale = c.node.attr_float("spatial_scale", 1.0);
  int64_t scale_bits = 0;
  static_assert(sizeof(scale_bits) == sizeof(scale));
  std::memcpy(&scale_bits, &scale, sizeof(scale));
  ExternCallSpec s;
  s.callee = "kiln_rt_roialign";
  s.args = {c.buffer(x), c.buffer(rois), c.buffer(batch_indices), c.output_buffer(0)};
  s.int_args = {static_cast<int64_t>(x->dtype), static_cast<int64_t>(batch_indices->dtype), x->shape[0], x->shape[1],
                x->shape[2], x->shape[3], rois->shape[0], c.node.attr_int("output_height", 1), c.node.attr_int("output_width", 1),
                c.node.attr_string("mode", "avg") == "max" ? 1 : 0, mode == "half_pixel" ? 1 : 0, scale_bits};
  return s;
}

}  // namespace

ExternCallSpec extern_call_spec(const Node& node, const std::vector<TensorRef>& inputs,
                                const std::vector<TensorRef>& outputs,
                                const std::map<const te::TensorNode*, BufferRef>& buffers) {
  CallContext c{node, inputs, outputs, buffers};
  if (node.domain.empty() || node.domain == "ai.onnx") {
    if (node.op_type == "TopK") return topk_call(c);
    if (node.op_type == "Det") return det_call(c);
    if (node.op_type == "BitCast") return bitcast_call(c);
    if (node.op_type == "RoiAlign") return roialign_call(c);
  }
  if (node.domain == "kiln") {
    if (node.op_type == "NonMaxSuppressionBounded") return nms_call(c);
    if (node.op_type == "NonZeroBounded") return nonzero_call(c);
    if (node.op_type == "UniqueBounded") return unique_call(c);
  }
  throw Unsupported(node.label() + ": no runtime kernel is compiled for " + node.op_type +
                    " (with constant inputs it folds away or becomes a loop nest)");
}

}  // namespace kiln::lower
