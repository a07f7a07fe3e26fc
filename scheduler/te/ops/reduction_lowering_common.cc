#include "scheduler/te/ops/reduction_lowering_common.h"

namespace kiln::te::reduction_lowering {

DType compute_dtype(DType t) { return t == DType::Float16 || t == DType::BFloat16 ? DType::Float32 : t; }

Expr load_as(const TensorRef& x, const std::vector<Expr>& idx, DType t) { return cast(t, at(x, idx)); }

Expr bool_imm(bool v) { return int_imm(v ? 1 : 0, DType::Bool); }

Expr is_finite(const Expr& v) { return unary(ExprOp::Not, unary(ExprOp::IsNaN, v) || unary(ExprOp::IsInf, v)); }

Shape kept_shape(const Shape& shape, const std::vector<bool>& reduced) {
  Shape kept = shape;
  for (size_t i = 0; i < kept.size(); ++i)
    if (reduced[i]) kept[i] = 1;
  return kept;
}

std::vector<Expr> kept_indices(const std::vector<Expr>& idx, const std::vector<bool>& reduced) {
  std::vector<Expr> r;
  for (size_t i = 0; i < idx.size(); ++i) r.push_back(reduced[i] ? int_imm(0) : idx[i]);
  return r;
}

int64_t reduced_count(const Shape& shape, const std::vector<bool>& reduced) {
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i)
    if (reduced[i]) n *= shape[i];
  return n;
}

TensorRef reduce_over(const std::string& name, DType dtype, const Shape& shape, const std::vector<bool>& reduced,
                      bool keepdims, Reducer reducer, const ValueFn& value, Expr init) {
  Shape out;
  std::vector<int64_t> extents;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (reduced[i]) {
      extents.push_back(shape[i]);
      if (keepdims) out.push_back(1);
    } else {
      out.push_back(shape[i]);
    }
  }
  return reduce(name, "reduction", dtype, out, reducer, extents,
                [&](const std::vector<Expr>& idx, const std::vector<Expr>& ridx) {
                  // Interleave the output's axes and the reduction axes back into a full index.
                  std::vector<Expr> full;
                  size_t o = 0, r = 0;
                  for (size_t i = 0; i < shape.size(); ++i) {
                    if (reduced[i]) {
                      full.push_back(ridx[r++]);
                      if (keepdims) ++o;
                    } else {
                      full.push_back(idx[o++]);
                    }
                  }
                  return value(full);
                },
                std::move(init));
}

Moments moments(const LowerContext& c, DType dtype, const Shape& shape, const std::vector<bool>& reduced,
                const ValueFn& value) {
  Shape stats = kept_shape(shape, reduced);
  Expr count = const_of(dtype, static_cast<double>(reduced_count(shape, reduced)));
  TensorRef sum = reduce_over(c.name("sum"), dtype, shape, reduced, true, Reducer::Sum, value);
  Moments m;
  m.mean = compute(c.name("mean"), "elementwise", dtype, stats,
                   [&](const std::vector<Expr>& idx) { return at(sum, idx) / count; });
  TensorRef square_sum = reduce_over(c.name("sqdev"), dtype, shape, reduced, true, Reducer::Sum,
                                     [&](const std::vector<Expr>& idx) {
                                       Expr d = value(idx) - at(m.mean, kept_indices(idx, reduced));
                                       return d * d;
                                     });
  m.var = compute(c.name("var"), "elementwise", dtype, stats,
                  [&](const std::vector<Expr>& idx) { return at(square_sum, idx) / count; });
  return m;
}

TensorRef inverse_std(const LowerContext& c, const TensorRef& var, double epsilon) {
  DType t = var->dtype;
  return compute(c.name("inv_std"), "elementwise", t, var->shape, [&](const std::vector<Expr>& idx) {
    return const_of(t, 1) / unary(ExprOp::Sqrt, at(var, idx) + const_of(t, epsilon));
  });
}

TensorRef cast_stage(const std::string& name, const TensorRef& t, DType dtype) {
  if (t->dtype == dtype) return t;
  return compute(name, "elementwise", dtype, t->shape, [&](const std::vector<Expr>& idx) { return cast(dtype, at(t, idx)); });
}

}  // namespace kiln::te::reduction_lowering
