// Reductions as tensor expressions: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare,
// ArgMax, ArgMin. This file also holds the family's entry point, register_reduction_lowerings; the
// softmax/loss and normalisation ops live in reduction_softmax_lowering.cc and reduction_norm_lowering.cc.
// The Reduce* ops and the axes they reduce come from frontend/ops/reduce_spec.h, as shape inference does.
#include "frontend/ops/axes_and_broadcast.h"
#include "frontend/ops/reduce_spec.h"
#include "scheduler/te/ops/reduction_lowering_common.h"

namespace kiln::te {
namespace reduction_lowering {
namespace {

// Kinds whose integer results the reference kernel computes exactly (wrapping); the others go
// through double and truncate.
bool exact_in_int(ReduceKind kind) {
  return kind != ReduceKind::L2 && kind != ReduceKind::LogSum && kind != ReduceKind::LogSumExp;
}

// The per-element term each kind accumulates, and the reducer combining the terms.
Expr reduce_term(ReduceKind kind, const Expr& v) {
  switch (kind) {
    case ReduceKind::L1: return unary(ExprOp::Abs, v);
    case ReduceKind::L2:
    case ReduceKind::SumSquare: return v * v;
    default: return v;
  }
}

Reducer reducer_of(ReduceKind kind) {
  switch (kind) {
    case ReduceKind::Max:
    case ReduceKind::LogSumExp: return Reducer::Max;  // LogSumExp: the first pass finds the maximum
    case ReduceKind::Min: return Reducer::Min;
    case ReduceKind::Prod: return Reducer::Prod;
    default: return Reducer::Sum;
  }
}

void lower_reduce(LowerContext& c, ReduceKind kind) {
  const TensorRef& x = c.input(0);
  DType out_t = c.out_dtype(0);
  const Tensor* axes_input = nullptr;
  if (reduce_axes_from_input(c.node(), kind) && c.has_input(1)) axes_input = &c.require_constant(1, "axes");
  ReduceAxes axes = reduce_axes(c.node(), kind, axes_input, c.rank(0));
  if (axes.noop) {
    c.set_output(0, compute(c.name(), "injective", out_t, x->shape, [&](const std::vector<Expr>& idx) { return at(x, idx); }));
    return;
  }
  const std::vector<bool>& reduced = axes.reduced;
  bool keepdims = axes.keepdims;
  int64_t count = reduced_count(x->shape, reduced);
  bool is_int = !is_float(x->dtype);

  // The accumulation dtype. Integer Sum/Prod/L1/SumSquare/Max/Min wrap in the tensor's own dtype, which
  // is what the reference's int64 wrapping gives modulo the dtype. Mean divides the sum, so it must
  // accumulate in 64 bits as the reference does. Inexact kinds on integers compute in double.
  DType acc_t = compute_dtype(x->dtype);
  if (is_int && kind == ReduceKind::Mean) acc_t = x->dtype == DType::UInt64 ? DType::UInt64 : DType::Int64;
  if (is_int && !exact_in_int(kind)) acc_t = DType::Float64;

  auto value = [&](const std::vector<Expr>& idx) { return load_as(x, idx, acc_t); };
  bool needs_finish = kind == ReduceKind::Mean || kind == ReduceKind::L2 || kind == ReduceKind::LogSum ||
                      kind == ReduceKind::LogSumExp || acc_t != out_t;
  TensorRef acc = reduce_over(needs_finish ? c.name("acc") : c.name(), acc_t, x->shape, reduced, keepdims,
                              reducer_of(kind), [&](const std::vector<Expr>& idx) { return reduce_term(kind, value(idx)); });
  if (!needs_finish) {
    c.set_output(0, acc);
    return;
  }

  TensorRef sum_exp;
  if (kind == ReduceKind::LogSumExp) {
    // Second pass: sum of exp(x - max), skipped when the maximum is infinite or NaN (then it is the
    // result, and exp(x - max) would only produce NaN).
    sum_exp = reduce_over(c.name("sum_exp"), acc_t, x->shape, reduced, keepdims, Reducer::Sum,
                          [&](const std::vector<Expr>& idx) {
                            std::vector<Expr> out_idx;
                            for (size_t i = 0; i < idx.size(); ++i)
                              if (!reduced[i] || keepdims) out_idx.push_back(reduced[i] ? int_imm(0) : idx[i]);
                            Expr m = at(acc, out_idx);
                            return select(is_finite(m), unary(ExprOp::Exp, value(idx) - m), const_of(acc_t, 0));
                          });
  }
  c.set_output(0, compute(c.name(), "elementwise", out_t, acc->shape, [&](const std::vector<Expr>& idx) {
    Expr a = at(acc, idx);
    Expr r = a;
    switch (kind) {
      case ReduceKind::Mean:
        // An empty integer mean stays 0 (the reference skips the division); floats give 0/0 = NaN.
        if (!is_int || count > 0) r = a / const_of(acc_t, static_cast<double>(count));
        break;
      case ReduceKind::L2: r = unary(ExprOp::Sqrt, a); break;
      case ReduceKind::LogSum: r = unary(ExprOp::Log, a); break;
      case ReduceKind::LogSumExp: r = select(is_finite(a), a + unary(ExprOp::Log, at(sum_exp, idx)), a); break;
      default: break;
    }
    // Integer outputs of the double path truncate; a non-finite result becomes 0, as in the reference.
    if (is_int && acc_t == DType::Float64) r = select(is_finite(r), r, const_of(acc_t, 0));
    return cast(out_t, r);
  }));
}

OpLowering reduce_lowering(const std::string& op_type, ReduceKind kind) {
  return {op_type, "", [kind](LowerContext& c) { lower_reduce(c, kind); }};
}

// ArgMax/ArgMin along one axis: the extreme value first, then the first (or, with select_last_index,
// last) index holding it. NaN counts as the extreme, and the first NaN wins even with
// select_last_index, because the reference never replaces a NaN best.
void lower_arg_extreme(LowerContext& c, bool want_max) {
  const TensorRef& x = c.input(0);
  DType t = x->dtype;
  int64_t rank = c.rank(0);
  int64_t axis = normalize_axis(c.node(), c.node().attr_int("axis", 0), rank);
  bool keepdims = c.node().attr_int("keepdims", 1) != 0;
  bool last = c.opset() >= 12 && c.node().attr_int("select_last_index", 0) != 0;
  int64_t extent = x->shape[static_cast<size_t>(axis)];
  std::vector<bool> reduced(static_cast<size_t>(rank), false);
  reduced[static_cast<size_t>(axis)] = true;

  // Comparisons only: the extreme is exact in the input's own dtype, NaN propagating through max/min.
  TensorRef best = reduce_over(c.name("best"), t, x->shape, reduced, true, want_max ? Reducer::Max : Reducer::Min,
                               [&](const std::vector<Expr>& idx) { return at(x, idx); });
  Expr k_last = int_imm(extent - 1);
  // Index of the first (Min reducer) or last (Max reducer) k where `hit(value, best)` holds. The
  // fallback keeps the result in [0, extent) even if nothing matched.
  auto index_of = [&](const std::string& suffix, bool find_last, const std::function<Expr(Expr, Expr)>& hit) {
    Expr miss = find_last ? int_imm(0) : k_last;
    return reduce_over(c.name(suffix), DType::Int64, x->shape, reduced, true, find_last ? Reducer::Max : Reducer::Min,
                       [&](const std::vector<Expr>& idx) {
                         Expr k = idx[static_cast<size_t>(axis)];
                         return select(hit(at(x, idx), at(best, kept_indices(idx, reduced))), k, miss);
                       },
                       miss);
  };
  auto equal = [](Expr v, Expr b) { return eq(v, b); };
  // With keepdims the index stage is the output itself.
  std::string index_name = keepdims ? "" : "index";
  TensorRef index;
  if (!is_float(t)) {
    index = index_of(index_name, last, equal);
  } else if (!last) {
    index = index_of(index_name, false, [](Expr v, Expr b) {
      return eq(v, b) || (unary(ExprOp::IsNaN, b) && unary(ExprOp::IsNaN, v));
    });
  } else {
    TensorRef first_nan = index_of("first_nan", false, [](Expr v, Expr) { return unary(ExprOp::IsNaN, v); });
    TensorRef last_equal = index_of("last_equal", true, equal);
    index = compute(c.name(index_name), "elementwise", DType::Int64, best->shape, [&](const std::vector<Expr>& idx) {
      return select(unary(ExprOp::IsNaN, at(best, idx)), at(first_nan, idx), at(last_equal, idx));
    });
  }
  if (keepdims) {
    c.set_output(0, index);
    return;
  }
  // Drop the reduced axis.
  c.set_output(0, compute(c.name(), "injective", DType::Int64, c.out_shape(0), [&](const std::vector<Expr>& idx) {
    std::vector<Expr> src = idx;
    src.insert(src.begin() + axis, int_imm(0));
    return at(index, src);
  }));
}

OpLowering arg_extreme_lowering(const std::string& op_type, bool want_max) {
  return {op_type, "", [want_max](LowerContext& c) { lower_arg_extreme(c, want_max); }};
}

}  // namespace

void register_reduce_lowerings(LoweringRegistry& r) {
  for (const ReduceOp& op : reduce_ops()) r.add(reduce_lowering(op.op_type, op.kind));
  r.add(arg_extreme_lowering("ArgMax", true));
  r.add(arg_extreme_lowering("ArgMin", false));
}

}  // namespace reduction_lowering

void register_reduction_lowerings(LoweringRegistry& r) {
  reduction_lowering::register_reduce_lowerings(r);
  reduction_lowering::register_softmax_lowerings(r);
  reduction_lowering::register_normalization_lowerings(r);
}

}  // namespace kiln::te
