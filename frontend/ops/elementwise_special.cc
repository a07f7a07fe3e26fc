// Elementwise ops that fit neither the unary nor the binary pattern: Cast, CastLike, Clip, Where, PRelu.
#include <cmath>
#include <limits>

#include "frontend/ir/narrow_types.h"
#include "frontend/ops/elementwise_common.h"

namespace kiln {
namespace elementwise {
namespace {

// Converts every element. Anything involving a float goes through double: float to integer truncates
// toward zero (Tensor saturates out-of-range values to int64 before wrapping, and maps NaN to 0),
// anything to bool tests != 0. Integer to integer goes through int64 and wraps. The narrow types read
// exactly as doubles; narrow floats are written by the rule, and floats become narrow integers
// truncated and wrapped (narrow_int_from_float), as integers wrap.
Tensor cast_tensor(const Tensor& x, DType to, const NarrowCastRule& rule) {
  Tensor y(to, x.shape());
  const bool from_float = is_float(x.dtype()) || is_narrow_float(x.dtype());
  bool via_double = from_float || is_float(to);
  for (int64_t i = 0; i < x.size(); ++i) {
    if (is_narrow_float(to)) {
      y.set_code(i, narrow_float_encode(to, x.get_double(i), rule.saturate, rule.power));
    } else if (is_narrow_int(to) && from_float) {
      y.set_code(i, narrow_int_from_float(to, x.get_double(i)));
    } else if (via_double) {
      y.set_double(i, x.get_double(i));
    } else {
      y.set_int(i, x.get_int(i));
    }
  }
  return y;
}

void require_castable(const InferContext& c, DType from, DType to) {
  if (!is_supported(from)) c.unsupported("casting from " + dtype_name(from) + " is not supported");
  if (!is_supported(to)) c.unsupported("casting to " + dtype_name(to) + " is not supported");
  if (is_narrow_float(to)) narrow_cast_rule(c.node());
}

OpDef cast_op() {
  OpDef d;
  d.op_type = "Cast";
  d.infer = [](InferContext& c) {
    c.require_input(0, "input");
    DType to = dtype_from_int(static_cast<int32_t>(c.node().required_int("to")));
    require_castable(c, c.dtype(0), to);
    c.set_output(0, to, c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    DType to = dtype_from_int(static_cast<int32_t>(c.node().required_int("to")));
    c.set_output(0, cast_tensor(c.input(0), to, narrow_cast_rule(c.node())));
  };
  d.takes_narrow_types = true;
  return d;
}

OpDef cast_like_op() {
  OpDef d;
  d.op_type = "CastLike";
  d.infer = [](InferContext& c) {
    c.require_input(0, "input");
    c.require_input(1, "target_type");
    require_castable(c, c.dtype(0), c.dtype(1));
    c.set_output(0, c.dtype(1), c.shape(0));
  };
  d.eval = [](EvalContext& c) { c.set_output(0, cast_tensor(c.input(0), c.input(1).dtype(), narrow_cast_rule(c.node()))); };
  d.takes_narrow_types = true;
  return d;
}

// Clip bounds: attributes min/max before opset 11, optional scalar inputs 1 and 2 from then on.
void check_clip_bound(const InferContext& c, size_t i, const char* what) {
  if (!c.has_input(i)) return;
  if (c.dtype(i) != c.dtype(0))
    c.fail(std::string(what) + " has dtype " + dtype_name(c.dtype(i)) + ", expected " + dtype_name(c.dtype(0)));
  // The spec asks for a scalar; exporters also emit one-element 1-D tensors, which mean the same.
  if (num_elements(c.shape(i)) != 1 || c.rank(i) > 1)
    c.fail(std::string(what) + " must be a scalar, got shape " + shape_str(c.shape(i)));
}

template <typename T>
T clamp_int(T v, T lo, T hi) {
  // min after max: when lo > hi every element becomes hi, as the spec says.
  if (v < lo) v = lo;
  if (v > hi) v = hi;
  return v;
}

OpDef clip_op() {
  OpDef d;
  d.op_type = "Clip";
  d.infer = [](InferContext& c) {
    c.require_input(0, "input");
    if (c.opset() < 11) {
      require_accepted(c, 0, Accepts::Floats);
    } else {
      require_accepted(c, 0, Accepts::Numeric);
      check_clip_bound(c, 1, "min");
      check_clip_bound(c, 2, "max");
    }
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    Tensor y(x.dtype(), x.shape());
    bool bounds_are_inputs = c.opset() >= 11;
    const Tensor* lo_t = bounds_are_inputs && c.has_input(1) ? &c.input(1) : nullptr;
    const Tensor* hi_t = bounds_are_inputs && c.has_input(2) ? &c.input(2) : nullptr;
    if (is_float(x.dtype())) {
      // Defaults are float32's extremes, as in the opset-6 spec; on the input side absent means no bound.
      double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
      if (!bounds_are_inputs) {
        lo = c.node().attr_float("min", std::numeric_limits<float>::lowest());
        hi = c.node().attr_float("max", std::numeric_limits<float>::max());
      }
      if (lo_t) lo = lo_t->get_double(0);
      if (hi_t) hi = hi_t->get_double(0);
      for (int64_t i = 0; i < x.size(); ++i) {
        double v = x.get_double(i);
        y.set_double(i, std::isnan(v) ? v : std::min(std::max(v, lo), hi));
      }
    } else if (is_signed(x.dtype())) {
      int64_t lo = lo_t ? lo_t->get_int(0) : std::numeric_limits<int64_t>::min();
      int64_t hi = hi_t ? hi_t->get_int(0) : std::numeric_limits<int64_t>::max();
      for (int64_t i = 0; i < x.size(); ++i) y.set_int(i, clamp_int(x.get_int(i), lo, hi));
    } else {
      uint64_t lo = lo_t ? static_cast<uint64_t>(lo_t->get_int(0)) : 0;
      uint64_t hi = hi_t ? static_cast<uint64_t>(hi_t->get_int(0)) : std::numeric_limits<uint64_t>::max();
      for (int64_t i = 0; i < x.size(); ++i)
        y.set_int(i, static_cast<int64_t>(clamp_int(static_cast<uint64_t>(x.get_int(i)), lo, hi)));
    }
    c.set_output(0, std::move(y));
  };
  d.flops = flops_per_output_element;
  return d;
}

OpDef where_op() {
  OpDef d;
  d.op_type = "Where";
  d.infer = [](InferContext& c) {
    c.require_input(0, "condition");
    c.require_input(1, "X");
    c.require_input(2, "Y");
    if (c.dtype(0) != DType::Bool) c.fail("condition has dtype " + dtype_name(c.dtype(0)) + ", expected bool");
    if (c.dtype(1) != c.dtype(2))
      c.fail("X and Y have different dtypes (" + dtype_name(c.dtype(1)) + ", " + dtype_name(c.dtype(2)) + ")");
    require_accepted(c, 1, Accepts::NumericAndBool);
    c.set_output(0, c.dtype(1), broadcast_inputs(c));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& cond = c.input(0);
    const Tensor& x = c.input(1);
    const Tensor& y = c.input(2);
    Shape out_shape = *broadcast(*broadcast(cond.shape(), x.shape()), y.shape());
    std::vector<int64_t> ic = broadcast_index_map(out_shape, cond.shape());
    std::vector<int64_t> ix = broadcast_index_map(out_shape, x.shape());
    std::vector<int64_t> iy = broadcast_index_map(out_shape, y.shape());
    Tensor out(x.dtype(), out_shape);
    bool floats = is_float(x.dtype());
    for (int64_t i = 0; i < out.size(); ++i) {
      const Tensor& src = cond.get_int(ic[i]) ? x : y;
      int64_t at = cond.get_int(ic[i]) ? ix[i] : iy[i];
      if (floats) out.set_double(i, src.get_double(at));  // exact: every float dtype fits in double
      else out.set_int(i, src.get_int(at));
    }
    c.set_output(0, std::move(out));
  };
  return d;
}

// PRelu: y = x < 0 ? slope * x : x, with slope broadcast to X's shape (never the other way round).
OpDef prelu_op() {
  OpDef d;
  d.op_type = "PRelu";
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    c.require_input(1, "slope");
    same_dtype_inputs(c);
    require_accepted(c, 0, Accepts::Numeric);
    auto b = broadcast(c.shape(0), c.shape(1));
    if (!b || *b != c.shape(0))
      c.fail("slope of shape " + shape_str(c.shape(1)) + " does not broadcast to X's shape " + shape_str(c.shape(0)));
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    const Tensor& slope = c.input(1);
    std::vector<int64_t> is = broadcast_index_map(x.shape(), slope.shape());
    Tensor y(x.dtype(), x.shape());
    for (int64_t i = 0; i < x.size(); ++i) {
      if (is_float(x.dtype())) {
        double v = x.get_double(i);
        y.set_double(i, v < 0 ? slope.get_double(is[i]) * v : v);
      } else {
        // Unsigned values are never negative, and get_int reads all but uint64 as non-negative;
        // uint64's bit pattern may look negative, so it is checked by dtype.
        int64_t v = x.get_int(i);
        bool negative = is_signed(x.dtype()) && v < 0;
        y.set_int(i, negative ? wrapping_mul(slope.get_int(is[i]), v) : v);
      }
    }
    c.set_output(0, std::move(y));
  };
  d.flops = flops_per_output_element;
  return d;
}

}  // namespace

void register_special_ops(OpRegistry& r) {
  r.add(cast_op());
  r.add(cast_like_op());
  r.add(clip_op());
  r.add(where_op());
  r.add(prelu_op());
}

}  // namespace elementwise
}  // namespace kiln
