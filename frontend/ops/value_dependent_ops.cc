// Ops whose output shape depends on input values: NonMaxSuppression, NonZero, Unique. kiln's shapes are
// static, so shape inference needs those inputs at compile time; it then computes the result outright
// and the outputs become constants. The kernels serve the reference interpreter all the same.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "frontend/ops/misc_family.h"

namespace kiln {
namespace misc {
namespace {

// Registers an op computed by `compute` (inputs -> outputs): infer requires the listed inputs to be
// constants and folds the node; eval runs the same computation.
using Compute = std::function<std::vector<Tensor>(const Node&, const std::vector<const Tensor*>&)>;

OpDef value_dependent_op(std::string name, std::vector<const char*> input_names, size_t required_inputs,
                         std::function<void(const InferContext&)> check, Compute compute) {
  OpDef d;
  d.op_type = std::move(name);
  d.infer = [input_names, required_inputs, check, compute](InferContext& c) {
    for (size_t i = 0; i < required_inputs; ++i) c.require_input(i, input_names[i]);
    if (c.num_inputs() > input_names.size()) c.fail("too many inputs");
    check(c);
    std::vector<const Tensor*> ins(c.num_inputs(), nullptr);
    for (size_t i = 0; i < c.num_inputs(); ++i)
      if (c.has_input(i)) ins[i] = &c.require_constant(i, input_names[i]);
    std::vector<Tensor> outs = compute(c.node(), ins);
    for (size_t i = 0; i < outs.size(); ++i) c.set_output_constant(i, std::move(outs[i]));
  };
  d.eval = [compute](EvalContext& c) {
    std::vector<const Tensor*> ins(c.num_inputs(), nullptr);
    for (size_t i = 0; i < c.num_inputs(); ++i)
      if (c.has_input(i)) ins[i] = &c.input(i);
    std::vector<Tensor> outs = compute(c.node(), ins);
    for (size_t i = 0; i < outs.size(); ++i) c.set_output(i, std::move(outs[i]));
  };
  return d;
}

Tensor int64_matrix(int64_t rows, int64_t cols, const std::vector<int64_t>& values) {
  return Tensor::from_ints(DType::Int64, {rows, cols}, values);
}

// ---- NonMaxSuppression ------------------------------------------------------------------------------

struct Box {
  double y_min, x_min, y_max, x_max;
};

// Corners from [y1, x1, y2, x2] (either corner order) or, with center_point_box, [x_center, y_center, w, h].
Box read_box(const Tensor& boxes, int64_t offset, bool center_point) {
  double v[4];
  for (int k = 0; k < 4; ++k) v[k] = boxes.get_double(offset + k);
  if (center_point)
    return {v[1] - v[3] / 2, v[0] - v[2] / 2, v[1] + v[3] / 2, v[0] + v[2] / 2};
  return {std::min(v[0], v[2]), std::min(v[1], v[3]), std::max(v[0], v[2]), std::max(v[1], v[3])};
}

bool overlaps_too_much(const Box& a, const Box& b, double iou_threshold) {
  double ix = std::min(a.x_max, b.x_max) - std::max(a.x_min, b.x_min);
  double iy = std::min(a.y_max, b.y_max) - std::max(a.y_min, b.y_min);
  if (ix <= 0 || iy <= 0) return false;
  double inter = ix * iy;
  double area_a = (a.x_max - a.x_min) * (a.y_max - a.y_min), area_b = (b.x_max - b.x_min) * (b.y_max - b.y_min);
  double uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > iou_threshold;
}

// Greedy selection per (batch, class): highest score first (lower box index on ties), dropping boxes
// whose IoU with an already selected box exceeds the threshold. Output rows [batch, class, box].
std::vector<Tensor> non_max_suppression(const Node& node, const std::vector<const Tensor*>& in) {
  const Tensor& boxes = *in[0];
  const Tensor& scores = *in[1];
  auto input_at = [&](size_t i) { return i < in.size() && in[i] && in[i]->size() > 0 ? in[i] : nullptr; };
  int64_t max_per_class = input_at(2) ? std::max<int64_t>(input_at(2)->get_int(0), 0) : 0;
  double iou_threshold = input_at(3) ? input_at(3)->get_double(0) : 0.0;
  const Tensor* score_threshold = input_at(4);
  bool center_point = node.attr_int("center_point_box", 0) != 0;
  int64_t batches = boxes.shape()[0], num_boxes = boxes.shape()[1], classes = scores.shape()[1];
  std::vector<int64_t> rows;
  std::vector<int64_t> candidates;
  std::vector<Box> selected;
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t cls = 0; cls < classes; ++cls) {
      int64_t score_base = (b * classes + cls) * num_boxes;
      candidates.clear();
      for (int64_t i = 0; i < num_boxes; ++i)
        if (!score_threshold || scores.get_double(score_base + i) > score_threshold->get_double(0)) candidates.push_back(i);
      std::sort(candidates.begin(), candidates.end(), [&](int64_t l, int64_t r) {
        double sl = scores.get_double(score_base + l), sr = scores.get_double(score_base + r);
        return sl > sr || (sl == sr && l < r);
      });
      selected.clear();
      for (int64_t i : candidates) {
        if (static_cast<int64_t>(selected.size()) >= max_per_class) break;
        Box box = read_box(boxes, (b * num_boxes + i) * 4, center_point);
        bool keep = std::none_of(selected.begin(), selected.end(),
                                 [&](const Box& s) { return overlaps_too_much(box, s, iou_threshold); });
        if (!keep) continue;
        selected.push_back(box);
        rows.insert(rows.end(), {b, cls, i});
      }
    }
  return {int64_matrix(static_cast<int64_t>(rows.size() / 3), 3, rows)};
}

void check_non_max_suppression(const InferContext& c) {
  require_float_input(c, 0, "boxes");
  require_float_input(c, 1, "scores");
  const Shape& boxes = c.shape(0);
  const Shape& scores = c.shape(1);
  if (boxes.size() != 3 || boxes[2] != 4) c.fail("boxes must be [batches, boxes, 4], got " + shape_str(boxes));
  if (scores.size() != 3 || scores[0] != boxes[0] || scores[2] != boxes[1])
    c.fail("scores must be [" + std::to_string(boxes[0]) + ", classes, " + std::to_string(boxes[1]) + "], got " +
           shape_str(scores));
  if (c.has_input(2)) require_integer_input(c, 2, "max_output_boxes_per_class");
  for (size_t i = 2; i < 5; ++i)
    if (c.has_input(i) && num_elements(c.shape(i)) > 1) c.fail("input " + std::to_string(i) + " must hold one value");
  int64_t center = c.node().attr_int("center_point_box", 0);
  if (center != 0 && center != 1) c.fail("center_point_box must be 0 or 1");
}

// ---- NonZero ----------------------------------------------------------------------------------------

// [rank, count] int64 coordinates of the nonzero elements in row-major order (a scalar counts as [1]).
std::vector<Tensor> non_zero(const Node&, const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  Shape shape = x.shape().empty() ? Shape{1} : x.shape();
  int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> flat;
  for (int64_t i = 0; i < x.size(); ++i)
    if (x.is_float_dtype() ? x.get_double(i) != 0.0 : x.get_int(i) != 0) flat.push_back(i);
  int64_t count = static_cast<int64_t>(flat.size());
  std::vector<int64_t> coords(static_cast<size_t>(rank * count));
  for (int64_t j = 0; j < count; ++j) {
    std::vector<int64_t> idx = unravel_index(flat[j], shape);
    for (int64_t a = 0; a < rank; ++a) coords[a * count + j] = idx[a];
  }
  return {int64_matrix(rank, count, coords)};
}

// ---- Unique -----------------------------------------------------------------------------------------

// Three-way comparison of elements i and j of a tensor, in its dtype's order; NaN above every number
// and equal to NaN, as numpy sorts (np.unique, ONNX's reference, collapses NaNs into one).
int compare_elements(const Tensor& t, int64_t i, int64_t j) {
  if (t.is_float_dtype()) {
    double a = t.get_double(i), b = t.get_double(j);
    if (std::isnan(a) || std::isnan(b)) return static_cast<int>(std::isnan(a)) - static_cast<int>(std::isnan(b));
    return a < b ? -1 : a > b ? 1 : 0;
  }
  if (!is_signed(t.dtype())) {
    auto a = static_cast<uint64_t>(t.get_int(i)), b = static_cast<uint64_t>(t.get_int(j));
    return a < b ? -1 : a > b ? 1 : 0;
  }
  int64_t a = t.get_int(i), b = t.get_int(j);
  return a < b ? -1 : a > b ? 1 : 0;
}

// Unique slices along an axis (every element is a slice when no axis is given). Outputs: the unique
// slices (sorted, or in order of first appearance), the index of each one's first appearance, the
// unique slice each input slice maps to, and the counts.
std::vector<Tensor> unique(const Node& node, const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  bool sorted = node.attr_int("sorted", 1) != 0;
  bool has_axis = node.has_attr("axis");
  Shape shape = has_axis ? x.shape() : Shape{x.size()};
  int64_t axis = has_axis ? normalize_axis(node, node.attr_int("axis", 0), x.rank()) : 0;
  int64_t outer = 1, inner = 1, slices = shape[axis];
  for (int64_t a = 0; a < axis; ++a) outer *= shape[a];
  for (size_t a = axis + 1; a < shape.size(); ++a) inner *= shape[a];
  // Slices compare lexicographically by their elements in row-major order.
  auto compare_slices = [&](int64_t s, int64_t t) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i)
        if (int c = compare_elements(x, (o * slices + s) * inner + i, (o * slices + t) * inner + i)) return c;
    return 0;
  };
  // Sorting (ties by position) puts equal slices next to each other, each run starting at its first
  // appearance; unsorted output then just reorders the runs by that first appearance.
  std::vector<int64_t> order(static_cast<size_t>(slices));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t s, int64_t t) {
    int c = compare_slices(s, t);
    return c < 0 || (c == 0 && s < t);
  });
  std::vector<int64_t> first, counts, inverse(static_cast<size_t>(slices));
  for (int64_t s : order) {
    if (first.empty() || compare_slices(first.back(), s) != 0) {
      first.push_back(s);
      counts.push_back(0);
    }
    ++counts.back();
    inverse[s] = static_cast<int64_t>(first.size()) - 1;
  }
  if (!sorted) {
    std::vector<int64_t> by_position(first.size());
    std::iota(by_position.begin(), by_position.end(), 0);
    std::sort(by_position.begin(), by_position.end(), [&](int64_t a, int64_t b) { return first[a] < first[b]; });
    std::vector<int64_t> rank(first.size()), new_first, new_counts;
    for (size_t k = 0; k < by_position.size(); ++k) {
      rank[by_position[k]] = static_cast<int64_t>(k);
      new_first.push_back(first[by_position[k]]);
      new_counts.push_back(counts[by_position[k]]);
    }
    for (int64_t& v : inverse) v = rank[v];
    first = std::move(new_first);
    counts = std::move(new_counts);
  }
  int64_t num_unique = static_cast<int64_t>(first.size());
  Shape y_shape = shape;
  y_shape[axis] = num_unique;
  Tensor y(x.dtype(), has_axis ? y_shape : Shape{num_unique});
  size_t esize = dtype_size(x.dtype());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t u = 0; u < num_unique; ++u)
      std::copy_n(x.data() + ((o * slices + first[u]) * inner) * esize, inner * esize,
                  y.data() + ((o * num_unique + u) * inner) * esize);
  auto vec = [](const std::vector<int64_t>& v) {
    return Tensor::from_ints(DType::Int64, {static_cast<int64_t>(v.size())}, v);
  };
  return {std::move(y), vec(first), vec(inverse), vec(counts)};
}

// ---- Bounded forms ----------------------------------------------------------------------------------

// `exact` with zeros appended along `axis` up to `bound` entries: a bounded form's output.
Tensor padded_along(const Tensor& exact, int64_t axis, int64_t bound, const Node& node) {
  const auto a = static_cast<size_t>(axis);
  const int64_t count = exact.shape()[a];
  if (count > bound) throw Error(node.label() + ": " + std::to_string(count) + " results exceed the bound " + std::to_string(bound));
  Shape shape = exact.shape();
  shape[a] = bound;
  Tensor out(exact.dtype(), shape);  // zeros
  int64_t outer = 1, inner = static_cast<int64_t>(dtype_size(exact.dtype()));  // inner in bytes
  for (size_t i = 0; i < a; ++i) outer *= shape[i];
  for (size_t i = a + 1; i < shape.size(); ++i) inner *= shape[i];
  for (int64_t o = 0; o < outer; ++o)
    std::copy_n(exact.data() + o * count * inner, count * inner, out.data() + o * bound * inner);
  return out;
}

// kiln.<op>Bounded: `op` for inputs known only at run time (frontend/passes/bound_run_time_shapes.h).
// Output 0 is `op`'s result padded with zeros along `axis` to the attribute "bound"; output 1, an
// int64 scalar, is how many entries along the axis are the result.
OpDef bounded_op(const std::string& op, int64_t axis, std::vector<const char*> input_names, size_t required_inputs,
                 std::function<void(const InferContext&)> check, Compute compute) {
  OpDef d;
  d.op_type = op + "Bounded";
  d.domain = "kiln";
  d.infer = [=](InferContext& c) {
    for (size_t i = 0; i < required_inputs; ++i) c.require_input(i, input_names[i]);
    if (c.num_inputs() > input_names.size()) c.fail("too many inputs");
    check(c);
    const int64_t bound = c.node().required_int("bound");
    const int64_t rank = op == "NonZero" ? std::max<int64_t>(1, static_cast<int64_t>(c.shape(0).size())) : 0;
    c.set_output(0, DType::Int64, op == "NonZero" ? Shape{rank, bound} : Shape{bound, 3});
    c.set_output(1, DType::Int64, Shape{});
  };
  d.eval = [=](EvalContext& c) {
    std::vector<const Tensor*> ins(c.num_inputs(), nullptr);
    for (size_t i = 0; i < c.num_inputs(); ++i)
      if (c.has_input(i)) ins[i] = &c.input(i);
    const Tensor exact = compute(c.node(), ins).front();
    c.set_output(0, padded_along(exact, axis, c.node().required_int("bound"), c.node()));
    c.set_output(1, Tensor::scalar_int(DType::Int64, exact.shape()[static_cast<size_t>(axis)]));
  };
  return d;
}

// kiln.UniqueBounded: Unique of an input known only at run time. Y (along the axis, or flat),
// indices and counts have the input's slice count as bound, padded with zeros; inverse_indices is
// exact; output 4 is the number of unique slices.
OpDef unique_bounded_op() {
  OpDef d;
  d.op_type = "UniqueBounded";
  d.domain = "kiln";
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    const Node& n = c.node();
    const bool has_axis = n.has_attr("axis");
    const int64_t axis = has_axis ? normalize_axis(n, n.attr_int("axis", 0), c.rank(0)) : 0;
    const Shape y = has_axis ? c.shape(0) : Shape{num_elements(c.shape(0))};
    const int64_t slices = y[static_cast<size_t>(axis)];
    c.set_output(0, c.dtype(0), y);
    for (size_t i = 1; i < 4; ++i) c.set_output(i, DType::Int64, {slices});
    c.set_output(4, DType::Int64, {});
  };
  d.eval = [](EvalContext& c) {
    std::vector<Tensor> exact = unique(c.node(), {&c.input(0)});
    const bool has_axis = c.node().has_attr("axis");
    const int64_t axis = has_axis ? normalize_axis(c.node(), c.node().attr_int("axis", 0), c.input(0).rank()) : 0;
    const int64_t slices = exact[2].size(), found = exact[1].size();  // inverse_indices: one per slice
    c.set_output(0, padded_along(exact[0], axis, slices, c.node()));
    c.set_output(1, padded_along(exact[1], 0, slices, c.node()));
    c.set_output(2, std::move(exact[2]));
    c.set_output(3, padded_along(exact[3], 0, slices, c.node()));
    c.set_output(4, Tensor::scalar_int(DType::Int64, found));
  };
  return d;
}

}  // namespace

void register_dynamic_shape_ops(OpRegistry& r) {
  r.add(unique_bounded_op());
  r.add(bounded_op("NonMaxSuppression", 0, {"boxes", "scores", "max_output_boxes_per_class", "iou_threshold", "score_threshold"},
                   2, check_non_max_suppression, non_max_suppression));
  r.add(bounded_op("NonZero", 1, {"X"}, 1, [](const InferContext&) {}, non_zero));
  r.add(value_dependent_op(
      "NonMaxSuppression", {"boxes", "scores", "max_output_boxes_per_class", "iou_threshold", "score_threshold"}, 2,
      check_non_max_suppression, non_max_suppression));
  r.add(value_dependent_op("NonZero", {"X"}, 1, [](const InferContext&) {}, non_zero));
  r.add(value_dependent_op(
      "Unique", {"X"}, 1,
      [](const InferContext& c) {
        if (c.node().has_attr("axis")) normalize_axis(c.node(), c.node().attr_int("axis", 0), c.rank(0));
      },
      unique));
}

}  // namespace misc
}  // namespace kiln
