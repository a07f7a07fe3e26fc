#include "frontend/ops/shape_attributes.h"

#include <algorithm>
#include <string>

#include "frontend/ops/axes_and_broadcast.h"

namespace kiln {
namespace {

[[noreturn]] void fail(const Node& node, const std::string& msg) { throw Error(node.label() + ": " + msg); }

// Wraps negative starts/ends once, then clamps them as numpy does: to [0, extent] going forwards and to
// [-1, extent - 1] going backwards (where -1 means "through element 0").
SliceAxis slice_axis(int64_t start, int64_t end, int64_t step, int64_t extent) {
  if (start < 0) start += extent;
  if (end < 0) end += extent;
  // Any step longer than the axis takes one element; bounding it keeps the arithmetic from overflowing.
  int64_t max_step = std::max<int64_t>(extent, 1);
  step = std::clamp(step, -max_step, max_step);
  SliceAxis s;
  s.step = step;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, extent);
    end = std::clamp<int64_t>(end, 0, extent);
    s.count = end > start ? (end - start - 1) / step + 1 : 0;
  } else {
    start = std::clamp<int64_t>(start, -1, extent - 1);
    end = std::clamp<int64_t>(end, -1, extent - 1);
    s.count = start > end ? (start - end - 1) / -step + 1 : 0;
  }
  s.start = start;
  return s;
}

}  // namespace

Tensor shape_op_value(const Node& node, const Shape& in) {
  int64_t r = static_cast<int64_t>(in.size());
  int64_t start = node.attr_int("start", 0);
  int64_t end = node.attr_int("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, start, r);
  std::vector<int64_t> dims(in.begin() + start, in.begin() + end);
  return Tensor::from_ints(DType::Int64, {static_cast<int64_t>(dims.size())}, dims);
}

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
  fail(n, "Constant has no value attribute");
}

Tensor constant_of_shape_fill(const Node& n) {
  const Tensor* v = n.attr_tensor("value");
  if (!v) return Tensor::scalar_double(DType::Float32, 0.0);
  if (v->size() != 1) fail(n, "value must have exactly one element, got " + std::to_string(v->size()));
  return *v;
}

std::vector<int64_t> transpose_perm(const Node& n, int64_t rank) {
  std::vector<int64_t> perm = n.attr_ints("perm");
  if (!n.has_attr("perm")) {
    for (int64_t i = rank - 1; i >= 0; --i) perm.push_back(i);
    return perm;
  }
  if (static_cast<int64_t>(perm.size()) != rank)
    fail(n, "perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(rank));
  std::vector<bool> seen(rank, false);
  for (int64_t& p : perm) {
    p = normalize_axis(n, p, rank);
    if (seen[p]) fail(n, "perm is not a permutation");
    seen[p] = true;
  }
  return perm;
}

std::vector<int64_t> split_sizes(const Node& n, int64_t extent, const IntInputLookup& int_input) {
  int64_t outputs = static_cast<int64_t>(n.outputs.size());
  std::vector<int64_t> sizes;
  if (n.opset < 13) {
    sizes = n.attr_ints("split");
  } else if (auto given = int_input(1, "split")) {
    sizes = *given;
  }
  if (!sizes.empty()) {
    if (static_cast<int64_t>(sizes.size()) != outputs)
      fail(n, "split has " + std::to_string(sizes.size()) + " entries for " + std::to_string(outputs) + " outputs");
    int64_t total = 0;
    for (int64_t s : sizes) {
      if (s < 0) fail(n, "negative split size " + std::to_string(s));
      total += s;
    }
    if (total != extent) fail(n, "split sizes sum to " + std::to_string(total) + ", axis extent is " + std::to_string(extent));
    return sizes;
  }
  if (n.opset >= 18 && n.has_attr("num_outputs")) {
    int64_t parts = n.attr_int("num_outputs", 0);
    if (parts != outputs) fail(n, "num_outputs is " + std::to_string(parts) + " but the node has " + std::to_string(outputs) + " outputs");
    int64_t chunk = parts > 0 ? (extent + parts - 1) / parts : 0;
    int64_t last = extent - chunk * (parts - 1);
    if (parts <= 0 || last < 0) fail(n, "cannot split extent " + std::to_string(extent) + " into " + std::to_string(parts) + " parts");
    sizes.assign(parts, chunk);
    sizes.back() = last;
    return sizes;
  }
  if (outputs <= 0 || extent % outputs != 0)
    fail(n, "cannot split extent " + std::to_string(extent) + " into " + std::to_string(outputs) + " equal parts");
  return std::vector<int64_t>(outputs, extent / outputs);
}

std::vector<SliceAxis> slice_plan(const Node& n, const Shape& in, const IntInputLookup& int_input) {
  std::vector<int64_t> starts, ends, axes, steps;
  if (n.opset < 10) {
    starts = n.required_ints("starts");
    ends = n.required_ints("ends");
    axes = n.attr_ints("axes");
  } else {
    starts = int_input(1, "starts").value_or(std::vector<int64_t>{});
    ends = int_input(2, "ends").value_or(std::vector<int64_t>{});
    axes = int_input(3, "axes").value_or(std::vector<int64_t>{});
    steps = int_input(4, "steps").value_or(std::vector<int64_t>{});
  }
  int64_t rank = static_cast<int64_t>(in.size());
  if (axes.empty())
    for (int64_t i = 0; i < static_cast<int64_t>(starts.size()); ++i) axes.push_back(i);
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    fail(n, "starts, ends, axes and steps must have the same length");
  std::vector<SliceAxis> plan(in.size());
  for (int64_t a = 0; a < rank; ++a) plan[a] = SliceAxis{0, 1, in[a]};
  std::vector<bool> seen(in.size(), false);
  for (size_t i = 0; i < starts.size(); ++i) {
    int64_t a = normalize_axis(n, axes[i], rank);
    if (seen[a]) fail(n, "axis " + std::to_string(a) + " is sliced twice");
    seen[a] = true;
    if (steps[i] == 0) fail(n, "step must not be 0");
    plan[a] = slice_axis(starts[i], ends[i], steps[i], in[a]);
  }
  return plan;
}

std::optional<std::vector<SliceAxis>> constant_slice_plan(const Graph& g, const Node& n) {
  struct RunTimeInput {};
  if (n.op_type != "Slice" || !n.domain.empty() || n.inputs.empty() || n.inputs[0].empty()) return std::nullopt;
  const IntInputLookup constant = [&](size_t i, const char*) -> std::optional<std::vector<int64_t>> {
    if (i >= n.inputs.size() || n.inputs[i].empty()) return std::nullopt;
    const Tensor* t = g.constant_input(n, i);
    if (!t) throw RunTimeInput{};
    return t->to_ints();
  };
  try {
    return slice_plan(n, g.value(n.inputs[0]).shape, constant);
  } catch (const RunTimeInput&) {
    return std::nullopt;
  } catch (const Error&) {
    return std::nullopt;
  }
}

std::optional<std::pair<int64_t, int64_t>> slice_run_along(const Graph& g, const Node& n, int64_t axis) {
  const std::optional<std::vector<SliceAxis>> plan = constant_slice_plan(g, n);
  if (!plan || axis < 0 || axis >= static_cast<int64_t>(plan->size())) return std::nullopt;
  const Shape& in = g.value(n.inputs[0]).shape;
  for (size_t a = 0; a < plan->size(); ++a) {
    const SliceAxis& s = (*plan)[a];
    if (s.step != 1) return std::nullopt;
    if (static_cast<int64_t>(a) != axis && (s.start != 0 || s.count != in[a])) return std::nullopt;
  }
  const SliceAxis& s = (*plan)[static_cast<size_t>(axis)];
  return std::pair{s.start, s.start + s.count};
}

std::optional<int64_t> contiguous_slice_offset(const Graph& g, const Node& n) {
  if (n.inputs.empty() || n.inputs[0].empty()) return std::nullopt;
  const Shape& in = g.value(n.inputs[0]).shape;
  for (size_t axis = 0; axis < in.size(); ++axis) {
    if (auto run = slice_run_along(g, n, static_cast<int64_t>(axis)))
      return run->first * num_elements(Shape(in.begin() + static_cast<std::ptrdiff_t>(axis) + 1, in.end()));
    if (in[axis] != 1) break;  // an axis before the cut one must have extent 1
  }
  return std::nullopt;
}

ScatterReduction parse_scatter_reduction(const Node& node) {
  std::string r = node.attr_string("reduction", "none");
  if (r == "none") return ScatterReduction::None;
  if (r == "add") return ScatterReduction::Add;
  if (r == "mul") return ScatterReduction::Mul;
  if (r == "max") return ScatterReduction::Max;
  if (r == "min") return ScatterReduction::Min;
  fail(node, "unknown reduction '" + r + "'");
}

}  // namespace kiln
