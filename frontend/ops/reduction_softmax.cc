// Normalised exponentials and the losses built on them: Softmax, LogSoftmax, Hardmax,
// NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss.
#include <cmath>
#include <limits>

#include "frontend/ops/reduction_internal.h"

namespace kiln::reduction_family {
namespace {

// The input seen as [outer, extent, inner]: each (outer, inner) pair is one row of `extent`
// elements, `inner` apart, that the op normalises.
struct RowLayout {
  int64_t outer = 1, extent = 1, inner = 1;
};

// Before opset 13 these ops flatten the input to 2-D at `axis` (default 1) and normalise each row of
// the flattened trailing block; from 13 on they normalise along the single axis (default -1).
RowLayout softmax_layout(const Node& node, const Shape& in) {
  int64_t rank = static_cast<int64_t>(in.size());
  RowLayout l;
  if (node.opset < 13) {
    int64_t axis = node.attr_int("axis", 1);
    // The 2-D coercion also allows axis == rank (every axis in `outer`).
    if (axis != rank) axis = normalize_axis(node, axis, rank);
    l.outer = extent_product(in, 0, axis);
    l.extent = extent_product(in, axis, in.size());
    return l;
  }
  int64_t axis = normalize_axis(node, node.attr_int("axis", -1), rank);
  if (rank == 0) return l;
  l.outer = extent_product(in, 0, axis);
  l.extent = in[axis];
  l.inner = extent_product(in, axis + 1, in.size());
  return l;
}

enum class SoftmaxKind { Softmax, LogSoftmax, Hardmax };

// Writes softmax / log-softmax / hardmax of one row. `at(k)` is the flat index of the row's k-th element.
template <typename At>
void normalise_row(SoftmaxKind kind, const Tensor& x, Tensor& y, int64_t extent, At at) {
  if (extent == 0) return;
  if (kind == SoftmaxKind::Hardmax) {
    int64_t best = 0;
    for (int64_t k = 1; k < extent; ++k)
      if (x.get_double(at(k)) > x.get_double(at(best))) best = k;
    for (int64_t k = 0; k < extent; ++k) y.set_double(at(k), k == best ? 1.0 : 0.0);
    return;
  }
  // Subtracting the row maximum keeps exp() from overflowing; it cancels out of the result.
  double row_max = -std::numeric_limits<double>::infinity();
  for (int64_t k = 0; k < extent; ++k) row_max = std::max(row_max, x.get_double(at(k)));
  double sum = 0;
  for (int64_t k = 0; k < extent; ++k) sum += std::exp(x.get_double(at(k)) - row_max);
  double log_sum = std::log(sum);
  for (int64_t k = 0; k < extent; ++k) {
    double shifted = x.get_double(at(k)) - row_max;
    y.set_double(at(k), kind == SoftmaxKind::Softmax ? std::exp(shifted) / sum : shifted - log_sum);
  }
}

OpDef softmax_op(std::string name, SoftmaxKind kind) {
  OpDef d;
  d.op_type = std::move(name);
  d.infer = [](InferContext& c) {
    require_float_input(c, 0, "input");
    softmax_layout(c.node(), c.shape(0));  // validates axis
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [kind](EvalContext& c) {
    const Tensor& x = c.input(0);
    RowLayout l = softmax_layout(c.node(), x.shape());
    Tensor y(x.dtype(), x.shape());
    for (int64_t o = 0; o < l.outer; ++o)
      for (int64_t i = 0; i < l.inner; ++i) {
        int64_t base = o * l.extent * l.inner + i;
        int64_t step = l.inner;
        normalise_row(kind, x, y, l.extent, [base, step](int64_t k) { return base + k * step; });
      }
    c.set_output(0, std::move(y));
  };
  // Per element: max compare, subtract, exp, sum, divide (or subtract the log); Hardmax only compares.
  d.flops = [kind](const NodeShapes& s) { return output_elements_times(s, kind == SoftmaxKind::Hardmax ? 1 : 5); };
  return d;
}

// ---- Losses ----------------------------------------------------------------------------------

// Scores/log-probabilities [N, C, d1..dk] seen as [N, C, D] with D = d1*..*dk; targets [N, d1..dk].
struct LossLayout {
  int64_t n = 0, classes = 0, spatial = 1;
  Shape target_shape;
};

LossLayout loss_layout(const Node& node, const Shape& scores) {
  if (scores.size() < 2)
    throw Error(node.label() + ": input must have shape [N, C, d1, ..., dk], got " + shape_str(scores));
  LossLayout l;
  l.n = scores[0];
  l.classes = scores[1];
  l.spatial = extent_product(scores, 2, scores.size());
  l.target_shape.push_back(scores[0]);
  for (size_t i = 2; i < scores.size(); ++i) l.target_shape.push_back(scores[i]);
  return l;
}

std::string loss_reduction(const Node& node) {
  std::string r = node.attr_string("reduction", "mean");
  if (r != "none" && r != "sum" && r != "mean")
    throw Error(node.label() + ": reduction must be 'none', 'sum' or 'mean', got '" + r + "'");
  return r;
}

// Shared shape inference of the two losses: input 0 scores, 1 targets, 2 optional class weights.
void infer_loss(InferContext& c) {
  require_float_input(c, 0, "input");
  c.require_input(1, "target");
  if (c.dtype(1) != DType::Int32 && c.dtype(1) != DType::Int64)
    c.fail("target must be int32 or int64, got " + dtype_name(c.dtype(1)));
  LossLayout l = loss_layout(c.node(), c.shape(0));
  if (c.shape(1) != l.target_shape)
    c.fail("target shape " + shape_str(c.shape(1)) + " does not match input shape " + shape_str(c.shape(0)) +
           " (expected " + shape_str(l.target_shape) + ")");
  if (c.has_input(2)) {
    require_dtype(c, 2, c.dtype(0), "weight");
    if (c.shape(2) != Shape{l.classes})
      c.fail("weight must have shape " + std::to_string(l.classes) + ", got " + shape_str(c.shape(2)));
  }
  Shape out = loss_reduction(c.node()) == "none" ? l.target_shape : Shape{};
  c.set_output(0, c.dtype(0), out);
}

// Weighted negative log-likelihood of log-probabilities `log_prob` ([N, C, D] row-major), as ONNX
// defines it: loss[n][d] = -weight[t] * log_prob[n][t][d] with t = target[n][d]; targets equal to
// ignore_index contribute 0 and weigh 0; "mean" divides by the total weight, not the count.
Tensor negative_log_likelihood(const Node& node, const LossLayout& l, const std::vector<double>& log_prob,
                               const Tensor& target, const Tensor* weight, DType out_dtype) {
  bool has_ignore = node.has_attr("ignore_index");
  int64_t ignore_index = node.attr_int("ignore_index", 0);
  std::string reduction = loss_reduction(node);
  Tensor loss(out_dtype, reduction == "none" ? l.target_shape : Shape{});
  double loss_sum = 0, weight_sum = 0;
  for (int64_t n = 0; n < l.n; ++n)
    for (int64_t d = 0; d < l.spatial; ++d) {
      int64_t at = n * l.spatial + d;
      int64_t t = target.get_int(at);
      double value = 0, w = 0;
      if (!(has_ignore && t == ignore_index)) {
        if (t < 0 || t >= l.classes)
          throw Error(node.label() + ": target " + std::to_string(t) + " is out of range for " +
                      std::to_string(l.classes) + " classes");
        w = weight ? weight->get_double(t) : 1.0;
        value = -w * log_prob[(n * l.classes + t) * l.spatial + d];
      }
      if (reduction == "none") loss.set_double(at, value);
      loss_sum += value;
      weight_sum += w;
    }
  if (reduction == "sum") loss.set_double(0, loss_sum);
  if (reduction == "mean") loss.set_double(0, loss_sum / weight_sum);
  return loss;
}

OpDef nll_loss_op() {
  OpDef d;
  d.op_type = "NegativeLogLikelihoodLoss";
  d.infer = infer_loss;
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    LossLayout l = loss_layout(c.node(), x.shape());
    c.set_output(0, negative_log_likelihood(c.node(), l, x.to_doubles(), c.input(1),
                                            c.has_input(2) ? &c.input(2) : nullptr, x.dtype()));
  };
  // Per target element: one multiply by the weight and one add into the reduction.
  d.flops = [](const NodeShapes& s) {
    return s.in.size() < 2 ? 0.0 : 2.0 * static_cast<double>(num_elements(s.in[1]));
  };
  return d;
}

OpDef softmax_cross_entropy_op() {
  OpDef d;
  d.op_type = "SoftmaxCrossEntropyLoss";
  d.infer = [](InferContext& c) {
    infer_loss(c);
    c.set_output(1, c.dtype(0), c.shape(0));  // optional log_prob
  };
  d.eval = [](EvalContext& c) {
    const Tensor& scores = c.input(0);
    LossLayout l = loss_layout(c.node(), scores.shape());
    // Log-softmax over the class axis, kept in double for the loss and rounded for the log_prob output.
    Tensor log_prob(scores.dtype(), scores.shape());
    Tensor exact_log_prob(DType::Float64, scores.shape());
    for (int64_t n = 0; n < l.n; ++n)
      for (int64_t s = 0; s < l.spatial; ++s) {
        int64_t base = n * l.classes * l.spatial + s;
        int64_t step = l.spatial;
        normalise_row(SoftmaxKind::LogSoftmax, scores, exact_log_prob, l.classes,
                      [base, step](int64_t k) { return base + k * step; });
      }
    for (int64_t i = 0; i < scores.size(); ++i) log_prob.set_double(i, exact_log_prob.get_double(i));
    c.set_output(0, negative_log_likelihood(c.node(), l, exact_log_prob.to_doubles(), c.input(1),
                                            c.has_input(2) ? &c.input(2) : nullptr, scores.dtype()));
    c.set_output(1, std::move(log_prob));
  };
  // Log-softmax (5 per score) plus the weighted sum (2 per target element).
  d.flops = [](const NodeShapes& s) {
    return input_elements_times(s, 5) + (s.in.size() < 2 ? 0.0 : 2.0 * static_cast<double>(num_elements(s.in[1])));
  };
  return d;
}

}  // namespace

void register_softmax_ops(OpRegistry& r) {
  r.add(softmax_op("Softmax", SoftmaxKind::Softmax));
  r.add(softmax_op("LogSoftmax", SoftmaxKind::LogSoftmax));
  r.add(softmax_op("Hardmax", SoftmaxKind::Hardmax));
}

void register_loss_ops(OpRegistry& r) {
  r.add(nll_loss_op());
  r.add(softmax_cross_entropy_op());
}

}  // namespace kiln::reduction_family
