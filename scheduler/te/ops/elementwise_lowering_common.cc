#include "scheduler/te/ops/elementwise_lowering_common.h"

namespace kiln::te::elementwise {

DType float_compute_dtype(DType t) {
  if (t == DType::Float16 || t == DType::BFloat16) return DType::Float32;
  if (!is_float(t)) return DType::Float64;
  return t;
}

Expr widen(const Expr& x) { return cast(float_compute_dtype(x->dtype), x); }

Expr imm(const Expr& like, double v) { return const_of(like->dtype, v); }

void set_mapped_output(LowerContext& c, const std::string& tag, const std::vector<size_t>& which, const ValuesFn& f) {
  const Shape& out_shape = c.out_shape(0);
  for (size_t i : which)
    if (c.shape(i).size() > out_shape.size())
      c.fail("input " + std::to_string(i) + " of shape " + shape_str(c.shape(i)) + " has a higher rank than the output " +
             shape_str(out_shape));
  c.set_output(0, compute(c.name(), tag, c.out_dtype(0), out_shape, [&](const std::vector<Expr>& idx) {
                 std::vector<Expr> values;
                 for (size_t i : which) values.push_back(at(c.input(i), broadcast_indices(idx, out_shape, c.shape(i))));
                 return f(values);
               }));
}

void set_broadcast_output(LowerContext& c, const ValuesFn& f) {
  std::vector<size_t> all;
  bool same_shapes = true;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    all.push_back(i);
    if (c.shape(i) != c.out_shape(0)) same_shapes = false;
  }
  set_mapped_output(c, same_shapes ? "elementwise" : "broadcast", all, f);
}

}  // namespace kiln::te::elementwise
