#include "scheduler/te/ops/broadcast_lowering.h"

namespace kiln::te {

std::vector<Expr> broadcast_indices(const std::vector<Expr>& idx, const Shape& out, const Shape& in) {
  std::vector<Expr> r;
  size_t offset = out.size() - in.size();
  for (size_t k = 0; k < in.size(); ++k) r.push_back(in[k] == 1 && out[k + offset] != 1 ? int_imm(0) : idx[k + offset]);
  return r;
}

TensorRef broadcast_compute(LowerContext& c, const std::string& tag, DType dtype, const Shape& out_shape,
                            const std::function<Expr(const std::vector<Expr>& values)>& f) {
  return compute(c.name(), tag, dtype, out_shape, [&](const std::vector<Expr>& idx) {
    std::vector<Expr> values;
    for (size_t i = 0; i < c.num_inputs(); ++i) {
      if (!c.has_input(i)) {
        values.push_back(nullptr);
        continue;
      }
      const TensorRef& t = c.input(i);
      values.push_back(at(t, broadcast_indices(idx, out_shape, t->shape)));
    }
    return f(values);
  });
}

}  // namespace kiln::te
