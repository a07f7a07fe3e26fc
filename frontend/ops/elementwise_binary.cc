// Elementwise ops, binary part: arithmetic, comparisons, logic, bitwise ops, Pow, Mod and the variadic
// Min/Max/Sum/Mean. All broadcast numpy-style.
#include <algorithm>
#include <cmath>
#include <limits>

#include "frontend/ops/elementwise_common.h"

namespace kiln {
namespace elementwise {
namespace {

// One binary function in the three forms kiln computes with. Which form runs depends on the input
// dtype: floats in double, signed integers in int64, unsigned integers and bool in uint64 (so uint64
// compares and divides correctly). Forms an op's accepted dtypes never reach may be left unset.
struct BinaryKernels {
  std::function<double(double, double)> on_float;
  std::function<int64_t(int64_t, int64_t)> on_signed;
  std::function<uint64_t(uint64_t, uint64_t)> on_unsigned;
};

// Applies `k` to a and b (same dtype) broadcast together; the result has dtype `out_dtype`.
Tensor apply_binary(const BinaryKernels& k, const Tensor& a, const Tensor& b, DType out_dtype) {
  Shape out_shape = *broadcast(a.shape(), b.shape());
  std::vector<int64_t> ia = broadcast_index_map(out_shape, a.shape());
  std::vector<int64_t> ib = broadcast_index_map(out_shape, b.shape());
  Tensor z(out_dtype, out_shape);
  DType t = a.dtype();
  if (is_float(t)) {
    for (int64_t i = 0; i < z.size(); ++i) z.set_double(i, k.on_float(a.get_double(ia[i]), b.get_double(ib[i])));
  } else if (is_signed(t)) {
    for (int64_t i = 0; i < z.size(); ++i) z.set_int(i, k.on_signed(a.get_int(ia[i]), b.get_int(ib[i])));
  } else {
    for (int64_t i = 0; i < z.size(); ++i) {
      uint64_t v = k.on_unsigned(static_cast<uint64_t>(a.get_int(ia[i])), static_cast<uint64_t>(b.get_int(ib[i])));
      z.set_int(i, static_cast<int64_t>(v));
    }
  }
  return z;
}

using KernelFactory = std::function<BinaryKernels(const Node&)>;

KernelFactory fixed(BinaryKernels k) {
  return [k](const Node&) { return k; };
}

// z = f(a, b) with a and b of one dtype; z has that dtype, or bool for comparisons and logic.
OpDef binary(std::string name, Accepts accepts, KernelFactory make, bool bool_output = false) {
  OpDef d;
  d.op_type = std::move(name);
  d.infer = [accepts, make, bool_output](InferContext& c) {
    c.require_input(0, "A");
    c.require_input(1, "B");
    DType t = same_dtype_inputs(c);
    require_accepted(c, 0, accepts);
    make(c.node());  // validates the attributes
    c.set_output(0, bool_output ? DType::Bool : t, broadcast_inputs(c));
  };
  d.eval = [make, bool_output](EvalContext& c) {
    const Tensor& a = c.input(0);
    c.set_output(0, apply_binary(make(c.node()), a, c.input(1), bool_output ? DType::Bool : a.dtype()));
  };
  d.flops = flops_per_output_element;
  return d;
}

// Min, Max, Sum, Mean: one or more inputs of one dtype, folded left to right as numpy would pairwise.
OpDef variadic(std::string name, Accepts accepts, BinaryKernels k, bool is_mean = false) {
  OpDef d;
  d.op_type = std::move(name);
  d.infer = [accepts](InferContext& c) {
    if (c.num_inputs() == 0) c.fail("needs at least one input");
    for (size_t i = 0; i < c.num_inputs(); ++i)
      if (!c.has_input(i)) c.fail("input " + std::to_string(i) + " is empty");
    same_dtype_inputs(c);
    require_accepted(c, 0, accepts);
    c.set_output(0, c.dtype(0), broadcast_inputs(c));
  };
  d.eval = [k, is_mean](EvalContext& c) {
    Tensor acc = c.input(0);
    for (size_t i = 1; i < c.num_inputs(); ++i) acc = apply_binary(k, acc, c.input(i), acc.dtype());
    if (is_mean) {
      double n = static_cast<double>(c.num_inputs());
      for (int64_t i = 0; i < acc.size(); ++i) acc.set_double(i, acc.get_double(i) / n);
    }
    c.set_output(0, std::move(acc));
  };
  // n inputs take n-1 pairwise ops per output element; Mean adds one division.
  d.flops = [is_mean](const NodeShapes& s) {
    double ops = static_cast<double>(s.in.size()) - (is_mean ? 0.0 : 1.0);
    return std::max(ops, 0.0) * flops_per_output_element(s);
  };
  return d;
}

[[noreturn]] void fail_on(const Node& n, const char* what) { throw Error(n.label() + ": " + what); }

KernelFactory div_kernels() {
  return [](const Node& n) {
    return BinaryKernels{
        [](double a, double b) { return a / b; },
        [&n](int64_t a, int64_t b) {
          if (b == 0) fail_on(n, "integer division by zero");
          if (b == -1) return wrapping_sub(0, a);  // INT64_MIN / -1 overflows in C++
          return a / b;  // truncates toward zero, as ONNX requires
        },
        [&n](uint64_t a, uint64_t b) {
          if (b == 0) fail_on(n, "integer division by zero");
          return a / b;
        }};
  };
}

// fmod=1: the remainder takes the dividend's sign (C fmod / %). fmod=0: it takes the divisor's sign
// (Python %). ONNX only allows fmod=0 for integers; kiln computes the Python form for floats too.
KernelFactory mod_kernels() {
  return [](const Node& n) {
    int64_t fmod_attr = n.attr_int("fmod", 0);
    if (fmod_attr != 0 && fmod_attr != 1) fail_on(n, "fmod must be 0 or 1");
    bool c_style = fmod_attr == 1;
    return BinaryKernels{
        [c_style](double a, double b) {
          double r = std::fmod(a, b);
          if (!c_style && r != 0 && (r < 0) != (b < 0)) r += b;
          return r;
        },
        [&n, c_style](int64_t a, int64_t b) {
          if (b == 0) fail_on(n, "integer modulo by zero");
          int64_t r = b == -1 ? 0 : a % b;  // INT64_MIN % -1 overflows in C++
          if (!c_style && r != 0 && (r < 0) != (b < 0)) r += b;
          return r;
        },
        [&n](uint64_t a, uint64_t b) {
          if (b == 0) fail_on(n, "integer modulo by zero");
          return a % b;
        }};
  };
}

KernelFactory bitshift_kernels() {
  return [](const Node& n) {
    std::string direction = n.attr_string("direction", "");
    if (direction != "LEFT" && direction != "RIGHT")
      fail_on(n, "direction must be \"LEFT\" or \"RIGHT\"");
    bool left = direction == "LEFT";
    // Bits shifted past the dtype's width are dropped when the result is stored; shifting 64 or more
    // places is UB in C++, and every such shift gives 0.
    return BinaryKernels{{}, {}, [left](uint64_t x, uint64_t s) -> uint64_t {
                           if (s >= 64) return 0;
                           return left ? x << s : x >> s;
                         }};
  };
}

template <typename T>
T min_of(T a, T b) { return b < a ? b : a; }
template <typename T>
T max_of(T a, T b) { return a < b ? b : a; }

// Min/Max propagate NaN as numpy's minimum/maximum do.
BinaryKernels min_kernels() {
  return {[](double a, double b) { return std::isnan(a) || std::isnan(b) ? std::nan("") : min_of(a, b); },
          min_of<int64_t>, min_of<uint64_t>};
}
BinaryKernels max_kernels() {
  return {[](double a, double b) { return std::isnan(a) || std::isnan(b) ? std::nan("") : max_of(a, b); },
          max_of<int64_t>, max_of<uint64_t>};
}
BinaryKernels add_kernels() {
  return {[](double a, double b) { return a + b; }, wrapping_add, [](uint64_t a, uint64_t b) { return a + b; }};
}

// Comparisons: the same predicate on every form.
template <typename Pred>
KernelFactory compare(Pred p) {
  return fixed({[p](double a, double b) -> double { return p(a, b); },
                [p](int64_t a, int64_t b) -> int64_t { return p(a, b); },
                [p](uint64_t a, uint64_t b) -> uint64_t { return p(a, b); }});
}

// Bitwise ops act on the bit patterns, the same for signed and unsigned dtypes (and for bool).
template <typename Op>
KernelFactory bitwise(Op op) {
  return fixed({{}, [op](int64_t a, int64_t b) { return op(a, b); },
                [op](uint64_t a, uint64_t b) { return op(a, b); }});
}

// base ** exponent for integers, wrapping on overflow. A negative exponent gives 0 unless |base| is 1
// (the true result rounded toward zero).
int64_t integer_pow(int64_t base, bool base_unsigned, int64_t exponent, bool exponent_unsigned) {
  if (!exponent_unsigned && exponent < 0) {
    if (base == 1) return 1;
    if (!base_unsigned && base == -1) return (exponent & 1) ? -1 : 1;
    return 0;
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base), e = static_cast<uint64_t>(exponent);
  while (e) {
    if (e & 1) result *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<int64_t>(result);
}

// Pow: the exponent may have a different dtype from opset 12 on; the result has the base's dtype.
OpDef pow_op() {
  OpDef d;
  d.op_type = "Pow";
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    c.require_input(1, "Y");
    require_accepted(c, 0, Accepts::Numeric);
    require_accepted(c, 1, Accepts::Numeric);
    if (c.opset() < 12 && c.dtype(0) != c.dtype(1))
      c.fail("base and exponent dtypes differ (" + dtype_name(c.dtype(0)) + ", " + dtype_name(c.dtype(1)) +
             "), which needs opset 12");
    c.set_output(0, c.dtype(0), broadcast_inputs(c));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    const Tensor& y = c.input(1);
    Shape out_shape = *broadcast(x.shape(), y.shape());
    std::vector<int64_t> ix = broadcast_index_map(out_shape, x.shape());
    std::vector<int64_t> iy = broadcast_index_map(out_shape, y.shape());
    Tensor z(x.dtype(), out_shape);
    bool exact = !is_float(x.dtype()) && !is_float(y.dtype());
    bool x_unsigned = !is_signed(x.dtype()), y_unsigned = !is_signed(y.dtype());
    for (int64_t i = 0; i < z.size(); ++i) {
      if (exact) z.set_int(i, integer_pow(x.get_int(ix[i]), x_unsigned, y.get_int(iy[i]), y_unsigned));
      else z.set_double(i, std::pow(x.get_double(ix[i]), y.get_double(iy[i])));  // truncated for int bases
    }
    c.set_output(0, std::move(z));
  };
  d.flops = flops_per_output_element;
  return d;
}

void add_arithmetic(OpRegistry& r) {
  r.add(binary("Add", Accepts::Numeric, fixed(add_kernels())));
  r.add(binary("Sub", Accepts::Numeric,
               fixed({[](double a, double b) { return a - b; }, wrapping_sub,
                      [](uint64_t a, uint64_t b) { return a - b; }})));
  r.add(binary("Mul", Accepts::Numeric,
               fixed({[](double a, double b) { return a * b; }, wrapping_mul,
                      [](uint64_t a, uint64_t b) { return a * b; }})));
  r.add(binary("Div", Accepts::Numeric, div_kernels()));
  r.add(binary("Mod", Accepts::Numeric, mod_kernels()));
  r.add(pow_op());

  r.add(variadic("Min", Accepts::Numeric, min_kernels()));
  r.add(variadic("Max", Accepts::Numeric, max_kernels()));
  r.add(variadic("Sum", Accepts::Numeric, add_kernels()));
  r.add(variadic("Mean", Accepts::Floats, add_kernels(), true));
}

void add_comparisons_and_logic(OpRegistry& r) {
  r.add(binary("Equal", Accepts::NumericAndBool, compare([](auto a, auto b) { return a == b; }), true));
  r.add(binary("Greater", Accepts::Numeric, compare([](auto a, auto b) { return a > b; }), true));
  r.add(binary("Less", Accepts::Numeric, compare([](auto a, auto b) { return a < b; }), true));
  r.add(binary("GreaterOrEqual", Accepts::Numeric, compare([](auto a, auto b) { return a >= b; }), true));
  r.add(binary("LessOrEqual", Accepts::Numeric, compare([](auto a, auto b) { return a <= b; }), true));

  r.add(binary("And", Accepts::Bool, bitwise([](auto a, auto b) { return a & b; }), true));
  r.add(binary("Or", Accepts::Bool, bitwise([](auto a, auto b) { return a | b; }), true));
  r.add(binary("Xor", Accepts::Bool, bitwise([](auto a, auto b) { return a ^ b; }), true));

  r.add(binary("BitwiseAnd", Accepts::Integers, bitwise([](auto a, auto b) { return a & b; })));
  r.add(binary("BitwiseOr", Accepts::Integers, bitwise([](auto a, auto b) { return a | b; })));
  r.add(binary("BitwiseXor", Accepts::Integers, bitwise([](auto a, auto b) { return a ^ b; })));
  r.add(binary("BitShift", Accepts::UnsignedInts, bitshift_kernels()));
}

}  // namespace

void register_binary_ops(OpRegistry& r) {
  add_arithmetic(r);
  add_comparisons_and_logic(r);
}

}  // namespace elementwise
}  // namespace kiln
