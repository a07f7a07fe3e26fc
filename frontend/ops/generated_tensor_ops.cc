// Ops that generate a tensor from attributes and shapes rather than from input elements: Constant,
// ConstantOfShape, EyeLike, Range.
#include <cmath>

#include "frontend/ops/shape_attributes.h"
#include "frontend/ops/shape_common.h"

namespace kiln::shape_family {
namespace {

OpDef constant_op() {
  OpDef d;
  d.op_type = "Constant";
  d.infer = [](InferContext& c) { c.set_output_constant(0, constant_value(c.node())); };
  d.eval = [](EvalContext& c) { c.set_output(0, constant_value(c.node())); };
  return d;
}

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

}  // namespace

void register_generated_tensor_ops(OpRegistry& r) {
  r.add(constant_op());
  r.add(constant_of_shape_op());
  r.add(eyelike_op());
  r.add(range_op());
}

}  // namespace kiln::shape_family
