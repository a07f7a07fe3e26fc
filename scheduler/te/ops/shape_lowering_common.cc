#include "scheduler/te/ops/shape_lowering_common.h"

#include <algorithm>

#include "frontend/ops/axes_and_broadcast.h"

namespace kiln::te::shape_lowering {

std::optional<std::vector<int64_t>> optional_ints(const LowerContext& c, size_t i, const char* what) {
  if (!c.has_input(i)) return std::nullopt;
  return tensor_ints(c.require_constant(i, what));
}

IntInputLookup int_inputs(const LowerContext& c) {
  return [&c](size_t i, const char* what) { return optional_ints(c, i, what); };
}

std::vector<int64_t> required_ints(const LowerContext& c, size_t i, const char* what) {
  if (!c.has_input(i)) c.fail(std::string("missing required input '") + what + "'");
  return tensor_ints(c.require_constant(i, what));
}

int64_t axis_attr(const LowerContext& c, const char* name, int64_t dflt, int64_t rank) {
  return normalize_axis(c.node(), c.node().attr_int(name, dflt), rank);
}

Expr flat_index(const std::vector<Expr>& idx, const Shape& shape) {
  Expr flat = int_imm(0);
  for (size_t k = 0; k < idx.size(); ++k) flat = k == 0 ? idx[0] : flat * shape[k] + idx[k];
  return flat;
}

std::vector<Expr> unflatten(const Expr& flat, const Shape& shape) {
  std::vector<Expr> idx(shape.size());
  int64_t stride = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    // Empty extents only occur in empty domains, where nothing is evaluated; max() keeps the
    // expression free of a division by zero all the same.
    Expr e = stride == 1 ? flat : floordiv(flat, int_imm(stride));
    idx[k] = k == 0 ? e : floormod(e, int_imm(std::max<int64_t>(shape[k], 1)));
    stride *= std::max<int64_t>(shape[k], 1);
  }
  return idx;
}

Expr load_at_flat(const TensorRef& t, int64_t flat) {
  std::vector<Expr> idx;
  for (int64_t k : unravel_index(flat, t->shape)) idx.push_back(int_imm(k));
  return at(t, idx);
}

Expr wrap_index(const Expr& index, int64_t n) {
  Expr i = cast(DType::Int64, index);
  return select(i < int_imm(0), i + n, i);
}

Expr wrap_and_clamp(const Expr& index, int64_t n) {
  return min(max(wrap_index(index, n), int_imm(0)), int_imm(std::max<int64_t>(n - 1, 0)));
}

TensorRef reshaped_copy(const TensorRef& x, const Shape& shape, const std::string& name) {
  return compute(name, "injective", x->dtype, shape, [&](const std::vector<Expr>& idx) {
    if (shape == x->shape) return at(x, idx);
    return at(x, unflatten(flat_index(idx, shape), x->shape));
  });
}

DType arith_dtype(DType t) { return t == DType::Float16 || t == DType::BFloat16 ? DType::Float32 : t; }

TensorRef reduce_in_arith_dtype(const LowerContext& c, const std::string& suffix, const std::string& tag, DType dtype,
                                const Shape& shape, Reducer reducer, const std::vector<int64_t>& extents,
                                const ArithReduceFn& body) {
  DType acc = arith_dtype(dtype);
  std::string name = acc == dtype ? c.name() : c.name(suffix);
  TensorRef r = reduce(name, tag, acc, shape, reducer, extents,
                       [&](const std::vector<Expr>& idx, const std::vector<Expr>& ridx) { return body(acc, idx, ridx); });
  if (acc == dtype) return r;
  return compute(c.name(), "elementwise", dtype, shape, [&](const std::vector<Expr>& idx) { return cast(dtype, at(r, idx)); });
}

}  // namespace kiln::te::shape_lowering
