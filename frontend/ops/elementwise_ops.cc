// Elementwise ops: unary math and activations, binary arithmetic, comparisons and logic, Cast.
#include <cmath>

#include "frontend/ops/op_util.h"

namespace kiln {
namespace {

// An op y = f(x) on floats, same dtype and shape in and out.
OpDef unary_float(std::string name, std::function<double(double, const Node&)> fn) {
  OpDef d;
  d.op_type = std::move(name);
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    if (!is_float(c.dtype(0))) c.unsupported("dtype " + dtype_name(c.dtype(0)) + " is not supported");
    c.set_output(0, c.dtype(0), c.shape(0));
  };
  d.eval = [fn](EvalContext& c) {
    const Tensor& x = c.input(0);
    Tensor y(x.dtype(), x.shape());
    for (int64_t i = 0; i < x.size(); ++i) y.set_double(i, fn(x.get_double(i), c.node()));
    c.set_output(0, std::move(y));
  };
  d.flops = flops_per_output_element;
  return d;
}

// A numpy-broadcasting op z = f(x, y) with both inputs of one dtype and the result in it too.
OpDef binary_arith(std::string name, std::function<double(double, double)> ffn,
                   std::function<int64_t(int64_t, int64_t)> ifn) {
  OpDef d;
  d.op_type = std::move(name);
  d.infer = [](InferContext& c) {
    c.require_input(0, "A");
    c.require_input(1, "B");
    DType t = same_dtype_inputs(c);
    c.set_output(0, t, broadcast_inputs(c));
  };
  d.eval = [ffn, ifn](EvalContext& c) {
    const Tensor& a = c.input(0);
    const Tensor& b = c.input(1);
    Shape out_shape = *broadcast(a.shape(), b.shape());
    auto ia = broadcast_index_map(out_shape, a.shape());
    auto ib = broadcast_index_map(out_shape, b.shape());
    Tensor z(a.dtype(), out_shape);
    for (int64_t i = 0; i < z.size(); ++i) {
      if (a.is_float_dtype()) z.set_double(i, ffn(a.get_double(ia[i]), b.get_double(ib[i])));
      else z.set_int(i, ifn(a.get_int(ia[i]), b.get_int(ib[i])));
    }
    c.set_output(0, std::move(z));
  };
  d.flops = flops_per_output_element;
  return d;
}

}  // namespace

void register_elementwise_ops(OpRegistry& r) {
  r.add(unary_float("Relu", [](double x, const Node&) { return x > 0 ? x : 0.0; }));
  r.add(binary_arith("Add", [](double a, double b) { return a + b; },
                     [](int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }));
}

}  // namespace kiln
