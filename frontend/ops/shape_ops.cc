// Data movement and shape plumbing: Shape, Reshape, Identity, Constant, ...
#include "frontend/ops/op_util.h"

namespace kiln {
namespace {

OpDef shape_op() {
  OpDef d;
  d.op_type = "Shape";
  d.infer = [](InferContext& c) {
    const Shape& s = c.shape(0);
    int64_t r = static_cast<int64_t>(s.size());
    int64_t start = c.node().attr_int("start", 0);
    int64_t end = c.node().attr_int("end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, 0, r);
    std::vector<int64_t> dims;
    for (int64_t i = start; i < end; ++i) dims.push_back(s[i]);
    int64_t n = static_cast<int64_t>(dims.size());
    c.set_output_constant(0, Tensor::from_ints(DType::Int64, {n}, dims));
  };
  d.eval = [](EvalContext& c) {
    const Shape& s = c.input(0).shape();
    int64_t r = static_cast<int64_t>(s.size());
    int64_t start = c.node().attr_int("start", 0);
    int64_t end = c.node().attr_int("end", r);
    if (start < 0) start += r;
    if (end < 0) end += r;
    start = std::clamp<int64_t>(start, 0, r);
    end = std::clamp<int64_t>(end, 0, r);
    std::vector<int64_t> dims;
    for (int64_t i = start; i < end; ++i) dims.push_back(s[i]);
    int64_t n = static_cast<int64_t>(dims.size());
    c.set_output(0, Tensor::from_ints(DType::Int64, {n}, dims));
  };
  return d;
}

// Reshape's target: 0 copies the input extent (unless allowzero), -1 is inferred.
Shape reshape_target(const Node& node, const Shape& in, const std::vector<int64_t>& spec) {
  bool allowzero = node.attr_int("allowzero", 0) != 0;
  Shape out(spec.size());
  int64_t infer_at = -1;
  int64_t known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == -1) {
      if (infer_at >= 0) throw Error(node.label() + ": more than one -1 in the target shape");
      infer_at = static_cast<int64_t>(i);
      continue;
    }
    if (d == 0 && !allowzero) {
      if (i >= in.size()) throw Error(node.label() + ": 0 in the target shape at an axis the input lacks");
      d = in[i];
    }
    if (d < 0) throw Error(node.label() + ": invalid extent " + std::to_string(d) + " in the target shape");
    out[i] = d;
    known *= d;
  }
  int64_t total = num_elements(in);
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0)
      throw Error(node.label() + ": cannot reshape " + shape_str(in) + " to the target shape");
    out[infer_at] = total / known;
  } else if (known != total) {
    throw Error(node.label() + ": cannot reshape " + shape_str(in) + " to " + shape_str(out));
  }
  return out;
}

OpDef reshape_op() {
  OpDef d;
  d.op_type = "Reshape";
  d.infer = [](InferContext& c) {
    c.require_input(0, "data");
    std::vector<int64_t> spec;
    if (c.opset() < 5) spec = c.node().required_ints("shape");
    else spec = tensor_ints(c.require_constant(1, "shape"));
    c.set_output(0, c.dtype(0), reshape_target(c.node(), c.shape(0), spec));
  };
  d.eval = [](EvalContext& c) {
    std::vector<int64_t> spec = c.opset() < 5 ? c.node().required_ints("shape") : tensor_ints(c.input(1));
    c.set_output(0, c.input(0).reshaped(reshape_target(c.node(), c.input(0).shape(), spec)));
  };
  return d;
}

OpDef identity_op(std::string name) {
  OpDef d;
  d.op_type = std::move(name);
  d.infer = [](InferContext& c) {
    c.require_input(0, "input");
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [](EvalContext& c) { c.set_output(0, c.input(0)); };
  return d;
}

// Constant's value comes from exactly one of its attributes.
Tensor constant_value(const Node& n) {
  if (const Tensor* t = n.attr_tensor("value")) return *t;
  if (n.has_attr("value_float")) return Tensor::scalar_double(DType::Float32, n.attr_float("value_float", 0));
  if (n.has_attr("value_int")) return Tensor::scalar_int(DType::Int64, n.attr_int("value_int", 0));
  if (n.has_attr("value_floats")) {
    auto v = n.attr_floats("value_floats");
    return Tensor::from_doubles(DType::Float32, {static_cast<int64_t>(v.size())}, v);
  }
  if (n.has_attr("value_ints")) {
    auto v = n.attr_ints("value_ints");
    return Tensor::from_ints(DType::Int64, {static_cast<int64_t>(v.size())}, v);
  }
  if (n.has_attr("sparse_value")) throw Unsupported(n.label() + ": sparse_value is not supported");
  if (n.has_attr("value_string") || n.has_attr("value_strings"))
    throw Unsupported(n.label() + ": string constants are not supported");
  throw Error(n.label() + ": Constant has no value attribute");
}

OpDef constant_op() {
  OpDef d;
  d.op_type = "Constant";
  d.infer = [](InferContext& c) { c.set_output_constant(0, constant_value(c.node())); };
  d.eval = [](EvalContext& c) { c.set_output(0, constant_value(c.node())); };
  return d;
}

}  // namespace

void register_shape_ops(OpRegistry& r) {
  r.add(shape_op());
  r.add(reshape_op());
  r.add(identity_op("Identity"));
  r.add(constant_op());
}

}  // namespace kiln
