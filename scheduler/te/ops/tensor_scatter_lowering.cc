// TensorScatter as a tensor expression: a copy of the cache with the update written along the sequence axis.
#include <functional>
#include <string>

#include "scheduler/te/ops/misc_family_lowering.h"

namespace kiln::te::misc {
namespace {

// Each cache position p along the axis takes update row s where start + s lands on p (modulo the cache
// length when circular), start = write_indices[batch]; other positions keep the cache.
void lower_tensor_scatter(LowerContext& c) {
  const TensorRef& cache = c.input(0);
  const TensorRef& update = c.input(1);
  const Shape& shape = c.shape(0);
  int64_t axis = c.node().attr_int("axis", -2);
  if (axis < 0) axis += c.rank(0);
  bool circular = c.node().attr_string("mode", "linear") == "circular";
  int64_t cache_len = shape[axis], update_len = c.shape(1)[axis];
  const TensorRef* indices = c.has_input(2) ? &c.input(2) : nullptr;
  c.set_output(0, compute(c.name(), "injective", c.out_dtype(0), shape, [&](const std::vector<Expr>& idx) {
    Expr start = indices ? cast(DType::Int64, at(*indices, {idx[0]})) : int_imm(0);
    Expr s = idx[axis] - start;
    if (circular) s = floormod(s, int_imm(cache_len));
    std::vector<Expr> src = idx;
    src[axis] = clamp_index(s, update_len);
    return select(in_range(s, 0, update_len), at(update, src), at(cache, idx));
  }));
}

}  // namespace

void register_tensor_scatter_lowering(LoweringRegistry& r) {
  r.add({"TensorScatter", "", lower_tensor_scatter});
}

}  // namespace kiln::te::misc
