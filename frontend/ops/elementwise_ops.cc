// Elementwise ops, unary part: math functions, activations, Not, BitwiseNot, IsNaN/IsInf. The
// binary ops live in elementwise_binary.cc, Cast/Clip/Where/PRelu in elementwise_special.cc; this file
// also holds the family's entry point.
#include <cmath>
#include <limits>
#include <numbers>

#include "frontend/ops/elementwise_common.h"

namespace kiln {
namespace elementwise {
namespace {

using FloatFn = std::function<double(double)>;
// Integer kernel: the element as get_int reads it (uint64 as its bit pattern), and whether the dtype is
// unsigned (bool counts as unsigned).
using IntFn = std::function<int64_t(int64_t, bool)>;

// A y = f(x) op with the output shaped like the input. `make_float` builds the kernel for one node
// (reading its attributes, and throwing on bad ones); it runs on doubles and also serves integer
// inputs when `int_fn` is unset (the result is then truncated to the integer dtype).
struct UnarySpec {
  std::string name;
  Accepts accepts = Accepts::Floats;
  std::function<FloatFn(const Node&)> make_float;
  IntFn int_fn;
  bool bool_output = false;  // IsNaN, IsInf
};

OpDef unary(std::string name, Accepts accepts, std::function<FloatFn(const Node&)> make_float, IntFn int_fn = {},
            bool bool_output = false) {
  UnarySpec spec{std::move(name), accepts, std::move(make_float), std::move(int_fn), bool_output};
  OpDef d;
  d.op_type = spec.name;
  d.infer = [spec](InferContext& c) {
    c.require_input(0, "X");
    require_accepted(c, 0, spec.accepts);
    if (spec.make_float) spec.make_float(c.node());  // validates the attributes
    c.set_output(0, spec.bool_output ? DType::Bool : c.dtype(0), c.shape(0));
  };
  d.eval = [spec](EvalContext& c) {
    const Tensor& x = c.input(0);
    Tensor y(spec.bool_output ? DType::Bool : x.dtype(), x.shape());
    if (spec.int_fn && !is_float(x.dtype())) {
      bool is_unsigned = !is_signed(x.dtype());
      for (int64_t i = 0; i < x.size(); ++i) y.set_int(i, spec.int_fn(x.get_int(i), is_unsigned));
    } else {
      FloatFn f = spec.make_float(c.node());
      for (int64_t i = 0; i < x.size(); ++i) y.set_double(i, f(x.get_double(i)));
    }
    c.set_output(0, std::move(y));
  };
  d.flops = flops_per_output_element;
  return d;
}

// Wraps an attribute-free function as a kernel factory.
std::function<FloatFn(const Node&)> plain(double (*fn)(double)) {
  return [fn](const Node&) { return FloatFn(fn); };
}

OpDef float_op(std::string name, double (*fn)(double)) {
  return unary(std::move(name), Accepts::Floats, plain(fn), {}, false);
}

double sigmoid(double x) {
  // Two forms so exp never overflows for large |x|.
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

double softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

void add_activations(OpRegistry& r) {
  r.add(unary("Relu", Accepts::FloatsAndSignedInts, plain([](double x) { return x < 0 ? 0.0 : x; }),
               [](int64_t x, bool) { return x < 0 ? int64_t{0} : x; }));
  r.add(unary("LeakyRelu", Accepts::Floats, [](const Node& n) -> FloatFn {
                 double alpha = n.attr_float("alpha", 0.01);
                 return [alpha](double x) { return x < 0 ? alpha * x : x; };
               }));
  r.add(float_op("Sigmoid", sigmoid));
  r.add(unary("HardSigmoid", Accepts::Floats, [](const Node& n) -> FloatFn {
                 double alpha = n.attr_float("alpha", 0.2), beta = n.attr_float("beta", 0.5);
                 return [alpha, beta](double x) { return std::clamp(alpha * x + beta, 0.0, 1.0); };
               }));
  r.add(float_op("HardSwish", [](double x) { return x * std::clamp(x / 6.0 + 0.5, 0.0, 1.0); }));
  r.add(float_op("Softplus", softplus));
  r.add(float_op("Softsign", [](double x) { return x / (1.0 + std::fabs(x)); }));
  r.add(unary("Elu", Accepts::Floats, [](const Node& n) -> FloatFn {
                 double alpha = n.attr_float("alpha", 1.0);
                 return [alpha](double x) { return x < 0 ? alpha * std::expm1(x) : x; };
               }));
  r.add(unary("Selu", Accepts::Floats, [](const Node& n) -> FloatFn {
                 // The defaults are the float32 values the ONNX spec lists.
                 double alpha = n.attr_float("alpha", 1.67326319217681884765625);
                 double gamma = n.attr_float("gamma", 1.05070102214813232421875);
                 return [alpha, gamma](double x) { return x > 0 ? gamma * x : gamma * alpha * std::expm1(x); };
               }));
  r.add(unary("Celu", Accepts::Floats, [](const Node& n) -> FloatFn {
                 double alpha = n.attr_float("alpha", 1.0);
                 if (alpha == 0) throw Error(n.label() + ": alpha must not be 0");
                 return [alpha](double x) { return std::max(0.0, x) + std::min(0.0, alpha * std::expm1(x / alpha)); };
               }));
  r.add(unary("Gelu", Accepts::Floats, [](const Node& n) -> FloatFn {
                 std::string approximate = n.attr_string("approximate", "none");
                 if (approximate == "none")
                   return [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2)); };
                 if (approximate == "tanh")
                   return [](double x) {
                     double k = std::sqrt(2.0 / std::numbers::pi);
                     return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
                   };
                 throw Error(n.label() + ": approximate must be 'none' or 'tanh', got '" + approximate + "'");
               }));
  r.add(float_op("Mish", [](double x) { return x * std::tanh(softplus(x)); }));
  r.add(unary("Swish", Accepts::Floats, [](const Node& n) -> FloatFn {
                 double alpha = n.attr_float("alpha", 1.0);
                 return [alpha](double x) { return x * sigmoid(alpha * x); };
               }));
  r.add(unary("ThresholdedRelu", Accepts::Floats, [](const Node& n) -> FloatFn {
                 double alpha = n.attr_float("alpha", 1.0);
                 return [alpha](double x) { return x > alpha ? x : 0.0; };
               }));
  r.add(unary("Shrink", Accepts::Numeric, [](const Node& n) -> FloatFn {
                 double lambd = n.attr_float("lambd", 0.5), bias = n.attr_float("bias", 0.0);
                 return [lambd, bias](double x) { return x < -lambd ? x + bias : x > lambd ? x - bias : 0.0; };
               }));
}

void add_math(OpRegistry& r) {
  r.add(float_op("Exp", [](double x) { return std::exp(x); }));
  r.add(float_op("Log", [](double x) { return std::log(x); }));
  r.add(float_op("Sqrt", [](double x) { return std::sqrt(x); }));
  r.add(float_op("Reciprocal", [](double x) { return 1.0 / x; }));
  r.add(float_op("Tanh", [](double x) { return std::tanh(x); }));
  // Erf takes integers too; their result is truncated back to the integer dtype.
  r.add(unary("Erf", Accepts::Numeric, plain([](double x) { return std::erf(x); })));
  r.add(float_op("Sin", [](double x) { return std::sin(x); }));
  r.add(float_op("Cos", [](double x) { return std::cos(x); }));
  r.add(float_op("Tan", [](double x) { return std::tan(x); }));
  r.add(float_op("Asin", [](double x) { return std::asin(x); }));
  r.add(float_op("Acos", [](double x) { return std::acos(x); }));
  r.add(float_op("Atan", [](double x) { return std::atan(x); }));
  r.add(float_op("Sinh", [](double x) { return std::sinh(x); }));
  r.add(float_op("Cosh", [](double x) { return std::cosh(x); }));
  r.add(float_op("Asinh", [](double x) { return std::asinh(x); }));
  r.add(float_op("Acosh", [](double x) { return std::acosh(x); }));
  r.add(float_op("Atanh", [](double x) { return std::atanh(x); }));
  r.add(float_op("Floor", [](double x) { return std::floor(x); }));
  r.add(float_op("Ceil", [](double x) { return std::ceil(x); }));
  // nearbyint in the default rounding mode rounds halves to even, as ONNX's Round requires.
  r.add(float_op("Round", [](double x) { return std::nearbyint(x); }));

  r.add(unary("Neg", Accepts::FloatsAndSignedInts, plain([](double x) { return -x; }),
               [](int64_t x, bool) { return wrapping_sub(0, x); }));
  r.add(unary("Abs", Accepts::Numeric, plain([](double x) { return std::fabs(x); }),
               [](int64_t x, bool is_unsigned) { return is_unsigned || x >= 0 ? x : wrapping_sub(0, x); }));
  // Sign keeps NaN (x > 0 and x < 0 are both false, so x itself is returned) and the sign of zero.
  r.add(unary("Sign", Accepts::Numeric, plain([](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x; }),
               [](int64_t x, bool is_unsigned) -> int64_t {
                 if (is_unsigned) return x != 0;
                 return (x > 0) - (x < 0);
               }));
  r.add(unary("IsNaN", Accepts::Floats, plain([](double x) { return std::isnan(x) ? 1.0 : 0.0; }), {}, true));
  r.add(unary("IsInf", Accepts::Floats,
               [](const Node& n) -> FloatFn {
                 bool positive = n.attr_int("detect_positive", 1) != 0;
                 bool negative = n.attr_int("detect_negative", 1) != 0;
                 return [positive, negative](double x) {
                   return std::isinf(x) && ((x > 0 && positive) || (x < 0 && negative)) ? 1.0 : 0.0;
                 };
               },
               {}, true));
  r.add(unary("Not", Accepts::Bool, {}, [](int64_t x, bool) -> int64_t { return x == 0; }));
  r.add(unary("BitwiseNot", Accepts::Integers, {}, [](int64_t x, bool) { return ~x; }));
}

}  // namespace

void register_unary_ops(OpRegistry& r) {
  add_activations(r);
  add_math(r);
}

}  // namespace elementwise

void register_elementwise_ops(OpRegistry& r) {
  elementwise::register_unary_ops(r);
  elementwise::register_binary_ops(r);
  elementwise::register_special_ops(r);
}

}  // namespace kiln
