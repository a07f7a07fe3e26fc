// Normalised exponentials and the losses built on them, as tensor expressions: Softmax, LogSoftmax,
// Hardmax, NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss.
#include <limits>

#include "frontend/ops/axes_and_broadcast.h"
#include "scheduler/te/ops/reduction_lowering_common.h"

namespace kiln::te::reduction_lowering {
namespace {

// The axes one row spans. Before opset 13 these ops flatten the input to 2-D at `axis` (default 1),
// so a row is every axis from `axis` on (none when axis == rank); from 13 on a row is the single
// `axis` (default -1).
std::vector<bool> row_axes(const LowerContext& c) {
  int64_t rank = c.rank(0);
  std::vector<bool> row(static_cast<size_t>(rank), false);
  if (c.opset() < 13) {
    int64_t axis = c.node().attr_int("axis", 1);
    if (axis != rank) axis = normalize_axis(c.node(), axis, rank);
    for (int64_t i = axis; i < rank; ++i) row[static_cast<size_t>(i)] = true;
    return row;
  }
  int64_t axis = normalize_axis(c.node(), c.node().attr_int("axis", -1), rank);
  if (rank > 0) row[static_cast<size_t>(axis)] = true;
  return row;
}

// The row-major position of full index `idx` within its row (the flattened `row` axes).
Expr position_in_row(const std::vector<Expr>& idx, const Shape& shape, const std::vector<bool>& row) {
  Expr pos = int_imm(0);
  for (size_t i = 0; i < shape.size(); ++i)
    if (row[i]) pos = pos * shape[i] + idx[i];
  return pos;
}

enum class SoftmaxKind { Softmax, LogSoftmax };

// Softmax or log-softmax of x over the `row` axes, in dtype `t`. Subtracting the row maximum keeps
// exp() from overflowing; it cancels out of the result.
TensorRef softmax_stages(const LowerContext& c, const TensorRef& x, const std::vector<bool>& row, DType t,
                         SoftmaxKind kind, const std::string& out_name) {
  const Shape& shape = x->shape;
  auto value = [&](const std::vector<Expr>& idx) { return load_as(x, idx, t); };
  TensorRef row_max = reduce_over(c.name("max"), t, shape, row, true, Reducer::Max, value);
  auto shifted = [&](const std::vector<Expr>& idx) { return value(idx) - at(row_max, kept_indices(idx, row)); };
  if (kind == SoftmaxKind::LogSoftmax) {
    TensorRef sum = reduce_over(c.name("sum"), t, shape, row, true, Reducer::Sum,
                                [&](const std::vector<Expr>& idx) { return unary(ExprOp::Exp, shifted(idx)); });
    return compute(out_name, "broadcast", t, shape, [&](const std::vector<Expr>& idx) {
      return shifted(idx) - unary(ExprOp::Log, at(sum, kept_indices(idx, row)));
    });
  }
  TensorRef exp = compute(c.name("exp"), "elementwise", t, shape,
                          [&](const std::vector<Expr>& idx) { return unary(ExprOp::Exp, shifted(idx)); });
  TensorRef sum = reduce_over(c.name("sum"), t, shape, row, true, Reducer::Sum,
                              [&](const std::vector<Expr>& idx) { return at(exp, idx); });
  return compute(out_name, "broadcast", t, shape,
                 [&](const std::vector<Expr>& idx) { return at(exp, idx) / at(sum, kept_indices(idx, row)); });
}

OpLowering softmax_lowering(const std::string& op_type, SoftmaxKind kind) {
  return {op_type, "", [kind](LowerContext& c) {
            const TensorRef& x = c.input(0);
            DType t = compute_dtype(x->dtype);
            TensorRef y = softmax_stages(c, x, row_axes(c), t, kind, t == x->dtype ? c.name() : c.name("y"));
            c.set_output(0, cast_stage(c.name(), y, x->dtype));
          }};
}

// Hardmax: 1 at the first maximum of each row, 0 elsewhere. Mirrors the reference's scan, which
// replaces its best only on a strictly greater value: NaNs are never chosen, except that a NaN at the
// start of the row is never replaced.
void lower_hardmax(LowerContext& c) {
  const TensorRef& x = c.input(0);
  DType t = x->dtype;
  const Shape& shape = x->shape;
  std::vector<bool> row = row_axes(c);
  int64_t extent = reduced_count(shape, row);
  Expr neg_inf = const_of(t, -std::numeric_limits<double>::infinity());
  TensorRef row_max = reduce_over(c.name("max"), t, shape, row, true, Reducer::Max, [&](const std::vector<Expr>& idx) {
    Expr v = at(x, idx);
    return select(unary(ExprOp::IsNaN, v), neg_inf, v);
  });
  Expr miss = int_imm(extent - 1);
  TensorRef best = reduce_over(c.name("best"), DType::Int64, shape, row, true, Reducer::Min,
                               [&](const std::vector<Expr>& idx) {
                                 Expr v = at(x, idx);
                                 Expr pos = position_in_row(idx, shape, row);
                                 Expr hit = eq(v, at(row_max, kept_indices(idx, row))) ||
                                            (eq(pos, int_imm(0)) && unary(ExprOp::IsNaN, v));
                                 return select(hit, pos, miss);
                               },
                               miss);
  c.set_output(0, compute(c.name(), "broadcast", t, shape, [&](const std::vector<Expr>& idx) {
    return select(eq(position_in_row(idx, shape, row), at(best, kept_indices(idx, row))), const_of(t, 1), const_of(t, 0));
  }));
}

// ---- Losses ----------------------------------------------------------------------------------

// log_prob(n, class, spatial index...) in the loss's compute dtype.
using LogProbFn = std::function<Expr(const Expr& n, const Expr& cls, const std::vector<Expr>& spatial)>;

// Weighted negative log-likelihood as ONNX defines it: loss[n][d...] = -weight[t] * log_prob[n][t][d...]
// with t = target[n][d...]; targets equal to ignore_index contribute 0 and weigh 0; "mean" divides by
// the total weight, not the count. Inputs: 1 target, 2 optional weight; `classes` is C.
TensorRef nll_stages(const LowerContext& c, const LogProbFn& log_prob, int64_t classes, DType t, DType out_t) {
  const TensorRef& target = c.input(1);
  const Shape& target_shape = target->shape;
  const TensorRef weight = c.has_input(2) ? c.input(2) : nullptr;
  bool has_ignore = c.node().has_attr("ignore_index");
  int64_t ignore_index = c.node().attr_int("ignore_index", 0);
  std::string reduction = c.node().attr_string("reduction", "mean");

  auto label = [&](const std::vector<Expr>& idx) { return cast(DType::Int64, at(target, idx)); };
  auto ignored = [&](const std::vector<Expr>& idx) {
    return has_ignore ? eq(label(idx), int_imm(ignore_index)) : bool_imm(false);
  };
  // Valid targets lie in [0, C) (the reference rejects others); clamp so that no load can leave the
  // tensor whatever the data says.
  auto clamped = [&](const std::vector<Expr>& idx) { return min(max(label(idx), int_imm(0)), int_imm(classes - 1)); };
  auto weight_of = [&](const std::vector<Expr>& idx) {
    return weight ? load_as(weight, {clamped(idx)}, t) : const_of(t, 1);
  };
  bool none = reduction == "none";
  std::string loss_name = none && t == out_t ? c.name() : c.name("loss");
  TensorRef loss = compute(loss_name, "injective", t, target_shape, [&](const std::vector<Expr>& idx) {
    std::vector<Expr> spatial(idx.begin() + 1, idx.end());
    Expr value = -(weight_of(idx) * log_prob(idx[0], clamped(idx), spatial));
    return select(ignored(idx), const_of(t, 0), value);
  });
  if (none) return cast_stage(c.name(), loss, out_t);

  std::vector<bool> all(target_shape.size(), true);
  TensorRef loss_sum = reduce_over(c.name("loss_sum"), t, target_shape, all, false, Reducer::Sum,
                                   [&](const std::vector<Expr>& idx) { return at(loss, idx); });
  if (reduction == "sum") return cast_stage(c.name(), loss_sum, out_t);
  TensorRef weight_sum = reduce_over(c.name("weight_sum"), t, target_shape, all, false, Reducer::Sum,
                                     [&](const std::vector<Expr>& idx) {
                                       return select(ignored(idx), const_of(t, 0), weight_of(idx));
                                     });
  return compute(c.name(), "elementwise", out_t, {}, [&](const std::vector<Expr>&) {
    return cast(out_t, at(loss_sum, {}) / at(weight_sum, {}));
  });
}

void lower_nll_loss(LowerContext& c) {
  const TensorRef& x = c.input(0);
  DType t = compute_dtype(x->dtype);
  LogProbFn log_prob = [&](const Expr& n, const Expr& cls, const std::vector<Expr>& spatial) {
    std::vector<Expr> idx{n, cls};
    idx.insert(idx.end(), spatial.begin(), spatial.end());
    return load_as(x, idx, t);
  };
  c.set_output(0, nll_stages(c, log_prob, x->shape[1], t, c.out_dtype(0)));
}

// Log-softmax over the class axis (1), then the negative log-likelihood of it; output 1 is the
// log-softmax itself.
void lower_softmax_cross_entropy(LowerContext& c) {
  const TensorRef& x = c.input(0);
  DType t = compute_dtype(x->dtype);
  std::vector<bool> class_axis(x->shape.size(), false);
  class_axis[1] = true;
  TensorRef log_prob = softmax_stages(c, x, class_axis, t, SoftmaxKind::LogSoftmax, c.name("log_prob"));
  LogProbFn log_prob_at = [&](const Expr& n, const Expr& cls, const std::vector<Expr>& spatial) {
    std::vector<Expr> idx{n, cls};
    idx.insert(idx.end(), spatial.begin(), spatial.end());
    return at(log_prob, idx);
  };
  c.set_output(0, nll_stages(c, log_prob_at, x->shape[1], t, c.out_dtype(0)));
  if (c.has_output(1)) c.set_output(1, cast_stage(c.name("log_prob_out"), log_prob, c.out_dtype(1)));
}

}  // namespace

void register_softmax_lowerings(LoweringRegistry& r) {
  r.add(softmax_lowering("Softmax", SoftmaxKind::Softmax));
  r.add(softmax_lowering("LogSoftmax", SoftmaxKind::LogSoftmax));
  r.add({"Hardmax", "", lower_hardmax});
  r.add({"NegativeLogLikelihoodLoss", "", lower_nll_loss});
  r.add({"SoftmaxCrossEntropyLoss", "", lower_softmax_cross_entropy});
}

}  // namespace kiln::te::reduction_lowering
