#include "frontend/passes/gemm_weights.h"

#include <map>

namespace kiln {

int transpose_gemm_weights(Graph& g) {
  int changed = 0;
  std::map<std::string, std::string> transposed;  // a B that several Gemms share is transposed once
  for (Node& n : g.nodes) {
    if (!n.domain.empty() || n.op_type != "Gemm" || n.inputs.size() < 2 || n.attr_int("transB", 0) == 0) continue;
    const Tensor* b = g.constant_input(n, 1);
    if (!b || !is_float(b->dtype()) || b->shape().size() != 2) continue;
    auto [it, added] = transposed.try_emplace(n.inputs[1]);
    if (added) {
      const int64_t rows = b->shape()[0], cols = b->shape()[1];
      Tensor t(b->dtype(), {cols, rows});
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) t.set_double(c * rows + r, b->get_double(r * cols + c));
      it->second = g.add_constant(n.inputs[1] + ".transposed", std::move(t));
    }
    n.inputs[1] = it->second;
    n.attrs["transB"] = AttrValue(int64_t{0});
    ++changed;
  }
  return changed;
}

}  // namespace kiln
