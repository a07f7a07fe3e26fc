// Reductions over axes: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare, ArgMax, ArgMin.
// The Reduce* ops and the axes they reduce come from reduce_spec.h, shared with the TE lowering.
// This file also holds the family's single entry point, register_reduction_ops.
#include <cmath>
#include <limits>

#include "frontend/ops/reduce_spec.h"
#include "frontend/ops/reduction_internal.h"

namespace kiln {
namespace reduction_family {
namespace {

// Which axes a Reduce* node reduces, and the resulting shape.
struct ReducePlan {
  bool noop = false;           // noop_with_empty_axes with no axes: the output is the input
  std::vector<bool> reduced;   // per input axis
  Shape kept_shape;            // the input shape with reduced axes set to 1
  Shape out_shape;             // kept_shape, or without the reduced axes when keepdims=0
};

ReducePlan plan_reduce(const Node& node, ReduceKind kind, const Tensor* axes_input, const Shape& in_shape) {
  ReduceAxes axes = reduce_axes(node, kind, axes_input, static_cast<int64_t>(in_shape.size()));
  ReducePlan plan;
  plan.noop = axes.noop;
  plan.reduced = axes.reduced;
  if (plan.noop) {
    plan.kept_shape = plan.out_shape = in_shape;
    return plan;
  }
  for (size_t i = 0; i < in_shape.size(); ++i) {
    plan.kept_shape.push_back(plan.reduced[i] ? 1 : in_shape[i]);
    if (!plan.reduced[i]) plan.out_shape.push_back(in_shape[i]);
    else if (axes.keepdims) plan.out_shape.push_back(1);
  }
  return plan;
}

bool allows_bool(ReduceKind kind) { return kind == ReduceKind::Max || kind == ReduceKind::Min; }

int64_t int_dtype_lowest(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
    case DType::UInt16:
    case DType::UInt32:
    case DType::UInt64: return 0;
    case DType::Int8: return std::numeric_limits<int8_t>::min();
    case DType::Int16: return std::numeric_limits<int16_t>::min();
    case DType::Int32: return std::numeric_limits<int32_t>::min();
    default: return std::numeric_limits<int64_t>::min();
  }
}

int64_t int_dtype_highest(DType t) {
  switch (t) {
    case DType::Bool: return 1;
    case DType::UInt8: return std::numeric_limits<uint8_t>::max();
    case DType::Int8: return std::numeric_limits<int8_t>::max();
    case DType::UInt16: return std::numeric_limits<uint16_t>::max();
    case DType::Int16: return std::numeric_limits<int16_t>::max();
    case DType::UInt32: return std::numeric_limits<uint32_t>::max();
    case DType::Int32: return std::numeric_limits<int32_t>::max();
    case DType::UInt64: return -1;  // all bits set: uint64 max as Tensor stores it
    default: return std::numeric_limits<int64_t>::max();
  }
}

// Integer ordering that respects uint64 values above INT64_MAX (stored as negative int64).
bool int_less(int64_t a, int64_t b, DType t) {
  if (t == DType::UInt64) return static_cast<uint64_t>(a) < static_cast<uint64_t>(b);
  return a < b;
}

int64_t wrapping_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrapping_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// The float reduction, in double. `count` is the number of input elements per output element.
std::vector<double> reduce_as_double(ReduceKind kind, const Tensor& x, const std::vector<int64_t>& out_of_in,
                                     int64_t out_size, int64_t count) {
  const double inf = std::numeric_limits<double>::infinity();
  double init = 0.0;
  if (kind == ReduceKind::Prod) init = 1.0;
  if (kind == ReduceKind::Max || kind == ReduceKind::LogSumExp) init = -inf;
  if (kind == ReduceKind::Min) init = inf;
  std::vector<double> acc(static_cast<size_t>(out_size), init);
  for (int64_t i = 0; i < x.size(); ++i) {
    double v = x.get_double(i);
    double& a = acc[out_of_in[i]];
    switch (kind) {
      case ReduceKind::Sum:
      case ReduceKind::Mean:
      case ReduceKind::LogSum: a += v; break;
      case ReduceKind::Prod: a *= v; break;
      case ReduceKind::Max:
      case ReduceKind::LogSumExp:  // first pass: the maximum, so that exp() below cannot overflow
        if (v > a || std::isnan(v)) a = v;
        break;
      case ReduceKind::Min:
        if (v < a || std::isnan(v)) a = v;
        break;
      case ReduceKind::L1: a += std::fabs(v); break;
      case ReduceKind::L2:
      case ReduceKind::SumSquare: a += v * v; break;
    }
  }
  if (kind == ReduceKind::LogSumExp) {
    std::vector<double> sum_exp(static_cast<size_t>(out_size), 0.0);
    for (int64_t i = 0; i < x.size(); ++i) {
      double m = acc[out_of_in[i]];
      if (std::isfinite(m)) sum_exp[out_of_in[i]] += std::exp(x.get_double(i) - m);
    }
    // An infinite or NaN maximum (or an empty set, -inf) is already the result.
    for (int64_t o = 0; o < out_size; ++o)
      if (std::isfinite(acc[o])) acc[o] += std::log(sum_exp[o]);
    return acc;
  }
  for (double& a : acc) {
    if (kind == ReduceKind::Mean) a /= static_cast<double>(count);
    else if (kind == ReduceKind::L2) a = std::sqrt(a);
    else if (kind == ReduceKind::LogSum) a = std::log(a);
  }
  return acc;
}

// The integer reduction, exact in int64 with two's-complement wrapping (as the stored dtype wraps).
std::vector<int64_t> reduce_as_int(ReduceKind kind, const Tensor& x, const std::vector<int64_t>& out_of_in,
                                   int64_t out_size, int64_t count) {
  DType t = x.dtype();
  int64_t init = 0;
  if (kind == ReduceKind::Prod) init = 1;
  if (kind == ReduceKind::Max) init = int_dtype_lowest(t);
  if (kind == ReduceKind::Min) init = int_dtype_highest(t);
  std::vector<int64_t> acc(static_cast<size_t>(out_size), init);
  for (int64_t i = 0; i < x.size(); ++i) {
    int64_t v = x.get_int(i);
    int64_t& a = acc[out_of_in[i]];
    switch (kind) {
      case ReduceKind::Sum:
      case ReduceKind::Mean: a = wrapping_add(a, v); break;
      case ReduceKind::Prod: a = wrapping_mul(a, v); break;
      case ReduceKind::Max:
        if (int_less(a, v, t)) a = v;
        break;
      case ReduceKind::Min:
        if (int_less(v, a, t)) a = v;
        break;
      case ReduceKind::L1: a = wrapping_add(a, v < 0 ? -v : v); break;
      case ReduceKind::SumSquare: a = wrapping_add(a, wrapping_mul(v, v)); break;
      default: break;  // L2, LogSum, LogSumExp go through reduce_as_double
    }
  }
  // Integer mean truncates toward zero, as numpy's mean with an integer dtype does.
  if (kind == ReduceKind::Mean && count > 0)
    for (int64_t& a : acc) a = t == DType::UInt64 ? static_cast<int64_t>(static_cast<uint64_t>(a) / count) : a / count;
  return acc;
}

bool exact_in_int(ReduceKind kind) {
  return kind != ReduceKind::L2 && kind != ReduceKind::LogSum && kind != ReduceKind::LogSumExp;
}

// FLOPs per input element, plus per output element for the final step.
double reduce_flops(ReduceKind kind, const NodeShapes& s) {
  double in = s.in.empty() ? 0 : static_cast<double>(num_elements(s.in[0]));
  double out = s.out.empty() ? 0 : static_cast<double>(num_elements(s.out[0]));
  switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Max:
    case ReduceKind::Min:
    case ReduceKind::Prod: return in;
    case ReduceKind::Mean:
    case ReduceKind::LogSum: return in + out;
    case ReduceKind::L1:
    case ReduceKind::SumSquare: return 2 * in;
    case ReduceKind::L2: return 2 * in + out;
    case ReduceKind::LogSumExp: return 4 * in + 2 * out;
  }
  return in;
}

OpDef reduce_op(std::string name, ReduceKind kind) {
  OpDef d;
  d.op_type = std::move(name);
  d.infer = [kind](InferContext& c) {
    c.require_input(0, "data");
    DType t = c.dtype(0);
    if (!is_float(t) && !is_integer(t) && !(t == DType::Bool && allows_bool(kind)))
      c.unsupported("dtype " + dtype_name(t) + " is not supported");
    const Tensor* axes = nullptr;
    if (reduce_axes_from_input(c.node(), kind) && c.has_input(1)) axes = &c.require_constant(1, "axes");
    ReducePlan plan = plan_reduce(c.node(), kind, axes, c.shape(0));
    c.set_output(0, t, plan.out_shape);
  };
  d.eval = [kind](EvalContext& c) {
    const Tensor& x = c.input(0);
    const Tensor* axes = reduce_axes_from_input(c.node(), kind) && c.has_input(1) ? &c.input(1) : nullptr;
    ReducePlan plan = plan_reduce(c.node(), kind, axes, x.shape());
    if (plan.noop) {
      c.set_output(0, x);
      return;
    }
    std::vector<int64_t> out_of_in = broadcast_index_map(x.shape(), plan.kept_shape);
    Tensor y(x.dtype(), plan.out_shape);
    int64_t count = 1;
    for (size_t i = 0; i < plan.reduced.size(); ++i)
      if (plan.reduced[i]) count *= x.shape()[i];
    if (!x.is_float_dtype() && exact_in_int(kind)) {
      std::vector<int64_t> acc = reduce_as_int(kind, x, out_of_in, y.size(), count);
      for (int64_t o = 0; o < y.size(); ++o) y.set_int(o, acc[o]);
    } else {
      std::vector<double> acc = reduce_as_double(kind, x, out_of_in, y.size(), count);
      for (int64_t o = 0; o < y.size(); ++o) {
        if (y.is_float_dtype()) y.set_double(o, acc[o]);
        else y.set_double(o, std::isfinite(acc[o]) ? std::trunc(acc[o]) : 0.0);
      }
    }
    c.set_output(0, std::move(y));
  };
  d.flops = [kind](const NodeShapes& s) { return reduce_flops(kind, s); };
  return d;
}

// ArgMax/ArgMin: the index of the extreme element along one axis (first one, or last with
// select_last_index). NaN counts as the extreme, as numpy's argmax/argmin do.
OpDef arg_extreme_op(std::string name, bool want_max) {
  struct Plan {
    int64_t axis, outer, extent, inner;
    Shape out_shape;
  };
  auto plan_of = [](const Node& node, const Shape& in) {
    int64_t rank = static_cast<int64_t>(in.size());
    if (rank == 0) throw Error(node.label() + ": input must have rank >= 1");
    Plan p;
    p.axis = normalize_axis(node, node.attr_int("axis", 0), rank);
    p.outer = extent_product(in, 0, p.axis);
    p.extent = in[p.axis];
    p.inner = extent_product(in, p.axis + 1, in.size());
    bool keepdims = node.attr_int("keepdims", 1) != 0;
    for (int64_t i = 0; i < rank; ++i) {
      if (i != p.axis) p.out_shape.push_back(in[i]);
      else if (keepdims) p.out_shape.push_back(1);
    }
    return p;
  };
  OpDef d;
  d.op_type = std::move(name);
  d.infer = [plan_of](InferContext& c) {
    c.require_input(0, "data");
    DType t = c.dtype(0);
    if (!is_float(t) && !is_integer(t)) c.unsupported("dtype " + dtype_name(t) + " is not supported");
    Plan p = plan_of(c.node(), c.shape(0));
    if (p.extent == 0 && num_elements(p.out_shape) > 0) c.fail("cannot take the extreme of an empty axis");
    c.set_output(0, DType::Int64, p.out_shape);
  };
  d.eval = [plan_of, want_max](EvalContext& c) {
    const Tensor& x = c.input(0);
    Plan p = plan_of(c.node(), x.shape());
    bool last = c.opset() >= 12 && c.node().attr_int("select_last_index", 0) != 0;
    bool is_fp = x.is_float_dtype();
    DType t = x.dtype();
    // True when element a should replace the current best b (strictly better, or equal and we want the last).
    auto replaces = [&](int64_t a, int64_t b) {
      if (is_fp) {
        double va = x.get_double(a), vb = x.get_double(b);
        if (std::isnan(vb)) return false;
        if (std::isnan(va)) return true;
        return want_max ? (va > vb || (last && va == vb)) : (va < vb || (last && va == vb));
      }
      int64_t va = x.get_int(a), vb = x.get_int(b);
      bool better = want_max ? int_less(vb, va, t) : int_less(va, vb, t);
      return better || (last && va == vb);
    };
    Tensor y(DType::Int64, p.out_shape);
    for (int64_t o = 0; o < p.outer; ++o)
      for (int64_t in = 0; in < p.inner; ++in) {
        int64_t base = o * p.extent * p.inner + in;
        int64_t best = 0;
        for (int64_t k = 1; k < p.extent; ++k)
          if (replaces(base + k * p.inner, base + best * p.inner)) best = k;
        y.set_int(o * p.inner + in, best);
      }
    c.set_output(0, std::move(y));
  };
  d.flops = [](const NodeShapes& s) { return input_elements_times(s, 1); };
  return d;
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  for (const ReduceOp& op : reduce_ops()) r.add(reduce_op(op.op_type, op.kind));
  r.add(arg_extreme_op("ArgMax", true));
  r.add(arg_extreme_op("ArgMin", false));
}

}  // namespace reduction_family

void register_reduction_ops(OpRegistry& r) {
  reduction_family::register_reduce_ops(r);
  reduction_family::register_softmax_ops(r);
  reduction_family::register_loss_ops(r);
  reduction_family::register_normalization_ops(r);
}

}  // namespace kiln
