#include "frontend/passes/bound_run_time_shapes.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "frontend/ir/error.h"
#include "frontend/ops/axes_and_broadcast.h"
#include "frontend/passes/node_emitter.h"

namespace kiln {
namespace {

bool constant_or_absent(const Graph& g, const Node& n, size_t i) {
  return i >= n.inputs.size() || n.inputs[i].empty() || g.value(n.inputs[i]).constant != nullptr;
}

const RunTimeExtent* extent_of(const Graph& g, const std::string& name) {
  auto e = g.run_time_extents.find(name);
  return e == g.run_time_extents.end() ? nullptr : &e->second;
}

int64_t rank_of(const Graph& g, const std::string& name) { return static_cast<int64_t>(g.value(name).shape.size()); }

// NonMaxSuppression's most rows: every class of every batch keeps at most min(boxes, max per class).
int64_t nms_bound(const Graph& g, const Node& n) {
  const Shape& boxes = g.value(n.inputs.at(0)).shape;
  const Shape& scores = g.value(n.inputs.at(1)).shape;
  if (boxes.size() != 3 || scores.size() != 3) throw Error(n.label() + ": boxes and scores must have rank 3");
  int64_t per_class = boxes[1];
  if (n.inputs.size() < 3 || n.inputs[2].empty()) per_class = 0;  // no max_output_boxes_per_class: none kept
  else if (const Tensor* max = g.constant_input(n, 2); max && max->size() > 0) per_class = std::clamp<int64_t>(max->get_int(0), 0, boxes[1]);
  return boxes[0] * scores[1] * per_class;
}

// The op as kiln.<op>Bounded: its first `axes.size()` outputs, then the count. Output i is counted
// along axes[i] (-1: known at compile time, as Unique's inverse_indices). `bound` < 0: no attribute
// (Unique's bound is its input's slice count, which the op reads itself).
void bound_with_kernel(Graph& g, size_t index, int64_t bound, const std::vector<int64_t>& axes) {
  Node b = g.nodes[index];
  const std::string origin = b.label();
  b.op_type += "Bounded";
  b.domain = "kiln";
  b.opset = 1;
  if (bound >= 0) b.attrs["bound"] = AttrValue(bound);
  b.outputs.resize(axes.size());
  const std::string count = g.add_value(b.name + "/count", DType::Int64, {});
  g.value(count).typed = false;
  b.outputs.push_back(count);
  for (size_t i = 0; i < axes.size(); ++i)
    if (!b.outputs[i].empty() && axes[i] >= 0) g.run_time_extents[b.outputs[i]] = {axes[i], count, origin};
  g.nodes[index] = std::move(b);
}

// TopK with a run-time k: the whole axis sorted, and min(max(k, 0), extent) as the count.
void bound_topk(Graph& g, size_t index) {
  const Node node = g.nodes[index];
  const Shape& x = g.value(node.inputs.at(0)).shape;
  const int64_t axis = normalize_axis(node, node.attr_int("axis", -1), static_cast<int64_t>(x.size()));
  const int64_t extent = x[static_cast<size_t>(axis)];
  NodeEmitter emit(g, node);
  const std::string k = emit.op("Reshape", {node.inputs[1], emit.ints({})});
  const std::string count = emit.op("Max", {emit.op("Min", {k, emit.int64(extent)}), emit.int64(0)});
  Node sorted = node;
  sorted.inputs[1] = emit.ints({extent});
  std::vector<Node> nodes = emit.nodes();
  nodes.push_back(sorted);
  for (const std::string& out : node.outputs)
    if (!out.empty()) g.run_time_extents[out] = {axis, count, node.label()};
  replace_node(g, index, nodes);
}

const std::set<std::string>& element_wise_ops() {
  static const std::set<std::string> ops = {
      "Identity", "Cast",    "CastLike", "Neg",       "Abs",           "Relu",    "Sigmoid",    "Tanh",         "Exp",
      "Log",      "Sqrt",    "Reciprocal", "Floor",   "Ceil",          "Round",   "Sign",       "Not",          "Clip",
      "Erf",      "IsNaN",   "IsInf",   "Softplus",  "LeakyRelu",     "HardSigmoid", "Add",     "Sub",          "Mul",
      "Div",      "Pow",     "Max",     "Min",       "Mod",           "Equal",   "Less",       "LessOrEqual",  "Greater",
      "GreaterOrEqual", "And", "Or",    "Xor",       "Where",         "BitShift", "BitwiseAnd", "BitwiseOr",   "BitwiseXor"};
  return ops;
}

// Where a reshaping op (Squeeze, Unsqueeze, Reshape, Flatten) puts axis `axis` of `in`: the output
// axis of the same extent with the same number of elements before it; -1 when the axis is merged or split.
int64_t reshaped_axis(const Shape& in, int64_t axis, const Shape& out) {
  const auto before = [](const Shape& s, size_t upto) {
    return std::accumulate(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(upto), int64_t{1}, std::multiplies<>());
  };
  const int64_t prefix = before(in, static_cast<size_t>(axis));
  for (size_t p = 0; p < out.size(); ++p)
    if (out[p] == in[static_cast<size_t>(axis)] && before(out, p) == prefix) return static_cast<int64_t>(p);
  return -1;
}

// Whether Slice `n` leaves axis `axis` of its data whole.
bool slice_keeps_axis(const Graph& g, const Node& n, int64_t axis) {
  const int64_t rank = rank_of(g, n.inputs[0]), extent = g.value(n.inputs[0]).shape[static_cast<size_t>(axis)];
  const Tensor* starts = g.constant_input(n, 1);
  const Tensor* ends = g.constant_input(n, 2);
  if (!starts || !ends) return false;
  const Tensor* axes = n.inputs.size() > 3 && !n.inputs[3].empty() ? g.constant_input(n, 3) : nullptr;
  const Tensor* steps = n.inputs.size() > 4 && !n.inputs[4].empty() ? g.constant_input(n, 4) : nullptr;
  if ((n.inputs.size() > 3 && !n.inputs[3].empty() && !axes) || (n.inputs.size() > 4 && !n.inputs[4].empty() && !steps)) return false;
  for (int64_t i = 0; i < starts->size(); ++i) {
    const int64_t a = axes ? normalize_axis(n, axes->get_int(i), rank) : i;
    if (a != axis) continue;
    const int64_t start = starts->get_int(i), end = ends->get_int(i), step = steps ? steps->get_int(i) : 1;
    if (step != 1 || (start != 0 && start > -extent) || end < extent) return false;
  }
  return true;
}

}  // namespace

bool has_run_time_shape(const Node& n, const Graph& g) {
  if (!n.domain.empty() || !g.run_time_shapes) return false;
  if (n.op_type == "NonMaxSuppression")
    return std::any_of(n.inputs.begin(), n.inputs.end(),
                       [&](const std::string& in) { return !in.empty() && !g.value(in).constant; });
  if (n.op_type == "NonZero" || n.op_type == "Unique") return !constant_or_absent(g, n, 0);
  if (n.op_type == "TopK") return n.opset >= 10 && !constant_or_absent(g, n, 1);
  return false;
}

void bound_run_time_shape(Graph& g, size_t index) {
  const Node& n = g.nodes.at(index);
  for (const std::string& in : n.inputs)
    if (!in.empty() && !g.value(in).typed) throw Error(n.label() + ": input '" + in + "' has no inferred type");
  if (n.op_type == "TopK") return bound_topk(g, index);
  if (n.op_type == "NonMaxSuppression") return bound_with_kernel(g, index, nms_bound(g, n), {0});
  const Shape& x = g.value(n.inputs.at(0)).shape;
  if (n.op_type == "Unique") {  // Y along its axis (flat: 0), indices and counts; inverse_indices is exact
    const int64_t axis = n.has_attr("axis") ? normalize_axis(n, n.attr_int("axis", 0), static_cast<int64_t>(x.size())) : 0;
    return bound_with_kernel(g, index, -1, {axis, 0, -1, 0});
  }
  bound_with_kernel(g, index, num_elements(x), {1});
}

void carry_run_time_extents(Graph& g, const Node& n) {
  const RunTimeExtent* seen = nullptr;
  size_t seen_input = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (const RunTimeExtent* e = n.inputs[i].empty() ? nullptr : extent_of(g, n.inputs[i])) {
      if (seen && seen->count != e->count)
        throw Error(n.label() + ": reads '" + n.inputs[seen_input] + "' and '" + n.inputs[i] +
                    "', whose extents are decided at run time by different counts (" + seen->origin + ", " + e->origin + ")");
      if (!seen) seen_input = i;
      if (!seen) seen = e;
    }
  if (!seen || n.outputs.empty() || n.outputs[0].empty()) return;
  const RunTimeExtent e = *seen;
  const std::string& in = n.inputs[seen_input];
  const auto fail = [&](const std::string& why) {
    throw Error(n.label() + ": reads '" + in + "', whose extent along axis " + std::to_string(e.axis) +
                " is decided at run time (by " + e.origin + ")" + (why.empty() ? "" : ", and " + why) +
                "; kiln passes such a value on only through element-wise ops, Gather, Slice, Squeeze, Unsqueeze, "
                "Reshape, Transpose and Concat that keep that axis apart");
  };
  const std::string& op = n.op_type;
  const int64_t out_rank = rank_of(g, n.outputs[0]);
  int64_t axis = -1;
  if (!n.domain.empty()) {
    fail("");
  } else if (element_wise_ops().count(op)) {
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const RunTimeExtent* x = n.inputs[i].empty() ? nullptr : extent_of(g, n.inputs[i]);
      if (!x) continue;
      const int64_t a = x->axis + out_rank - rank_of(g, n.inputs[i]);
      if (axis >= 0 && a != axis) fail("broadcasts it against another along a different axis");
      axis = a;
    }
  } else if (op == "Gather") {
    const int64_t data_rank = rank_of(g, n.inputs[0]);
    const int64_t k = normalize_axis(n, n.attr_int("axis", 0), data_rank);
    const RunTimeExtent* data = extent_of(g, n.inputs[0]);
    const RunTimeExtent* indices = n.inputs.size() > 1 ? extent_of(g, n.inputs[1]) : nullptr;
    if (data && indices) fail("gathers from one run-time-sized value by another");
    if (data && data->axis == k) fail("gathers along that axis");
    if (data) axis = data->axis < k ? data->axis : data->axis - 1 + rank_of(g, n.inputs[1]);
    else axis = k + indices->axis;
  } else if (op == "Squeeze" || op == "Unsqueeze" || op == "Reshape" || op == "Flatten") {
    if (seen_input != 0) fail("uses it as a shape");
    axis = reshaped_axis(g.value(in).shape, e.axis, g.value(n.outputs[0]).shape);
    if (axis < 0) fail("merges or splits that axis");
  } else if (op == "Transpose") {
    std::vector<int64_t> perm = n.attr_ints("perm");
    if (perm.empty())
      for (int64_t a = out_rank - 1; a >= 0; --a) perm.push_back(a);
    axis = std::find(perm.begin(), perm.end(), e.axis) - perm.begin();
  } else if (op == "Slice") {
    if (seen_input != 0) fail("uses it as a slice bound");
    if (!slice_keeps_axis(g, n, e.axis)) fail("slices along that axis (or with bounds not known at compile time)");
    axis = e.axis;
  } else if (op == "Concat") {
    const int64_t k = normalize_axis(n, n.required_int("axis"), out_rank);
    for (const std::string& x : n.inputs)
      if (const RunTimeExtent* xe = x.empty() ? nullptr : extent_of(g, x); xe && xe->axis != e.axis) fail("concatenates it with a value sized at run time along another axis");
    if (k == e.axis) fail("concatenates along that axis");
    axis = e.axis;
  } else {
    fail("");
  }
  g.run_time_extents[n.outputs[0]] = {axis, e.count, e.origin};
}

void add_count_outputs(Graph& g) {
  std::vector<std::string> counts;
  for (const std::string& o : g.outputs) {
    const RunTimeExtent* e = extent_of(g, o);
    if (!e || g.count_outputs.count(o)) continue;  // inference may run again (after expanding LSTMs)
    const std::string count = append_copy(g, e->count, o + ".count");
    g.count_outputs[o] = {e->axis, count, e->origin};
    counts.push_back(count);
    g.limits.push_back("output '" + o + "' holds '" + count + "' valid entries along axis " + std::to_string(e->axis) +
                       " (decided at run time by " + e->origin + "); the entries past them are unspecified");
  }
  if (counts.empty()) return;
  if (g.model_outputs.empty()) g.model_outputs = g.outputs;
  g.outputs.insert(g.outputs.end(), counts.begin(), counts.end());
}

}  // namespace kiln
