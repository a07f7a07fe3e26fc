// Elementwise ops as tensor expressions, unary part: math functions, activations, Not, BitwiseNot,
// IsNaN/IsInf. Binary and variadic ops live in elementwise_binary_lowering.cc, Cast/CastLike/Clip/Where/
// PRelu in elementwise_special_lowering.cc; this file also holds the family's entry point. The formulas
// mirror the reference kernels in frontend/ops/elementwise_*.cc.
#include <cmath>
#include <numbers>
#include <utility>

#include "scheduler/te/ops/elementwise_lowering_common.h"

namespace kiln::te {
namespace {

using elementwise::imm;
using elementwise::widen;

// y = f(x) with x already widened to its float compute dtype (see float_compute_dtype); the result is
// cast back to the output dtype, which also truncates for the integer inputs Erf and Shrink accept.
using FloatBody = std::function<Expr(const Expr& x, const Node& n)>;
// y = f(x) on an integer or bool x in its own dtype (exact, wrapping like the reference kernel).
using IntBody = std::function<Expr(const Expr& x)>;

OpLowering float_unary(const std::string& op_type, FloatBody f) {
  return {op_type, "", [f](LowerContext& c) {
            elementwise::set_mapped_output(c, "elementwise", {0}, [&](const std::vector<Expr>& v) {
              return cast(c.out_dtype(0), f(widen(v[0]), c.node()));
            });
          }};
}

// An op with an exact integer form: float inputs take `on_float`, the others `on_int`.
OpLowering numeric_unary(const std::string& op_type, FloatBody on_float, IntBody on_int) {
  return {op_type, "", [on_float, on_int](LowerContext& c) {
            elementwise::set_mapped_output(c, "elementwise", {0}, [&](const std::vector<Expr>& v) {
              if (is_float(v[0]->dtype)) return cast(c.out_dtype(0), on_float(widen(v[0]), c.node()));
              return on_int(v[0]);
            });
          }};
}

// An attribute-free op that is one expression node.
OpLowering math_unary(const std::string& op_type, ExprOp op) {
  return float_unary(op_type, [op](const Expr& x, const Node&) { return unary(op, x); });
}

// An op whose integer form is an expression node too (BitwiseNot, Not).
OpLowering int_unary(const std::string& op_type, ExprOp op) {
  return numeric_unary(
      op_type, [op](const Expr& x, const Node&) { return unary(op, x); },
      [op](const Expr& x) { return unary(op, x); });
}

Expr exp_minus_one(const Expr& x) { return unary(ExprOp::Exp, x) - imm(x, 1); }

// Both branches of the reference's overflow-safe form; select evaluates only the chosen one, and in
// generated code the unchosen branch's inf is discarded.
Expr softplus(const Expr& x) {
  Expr one = imm(x, 1);
  return select(x > imm(x, 0), x + unary(ExprOp::Log, one + unary(ExprOp::Exp, -x)),
                unary(ExprOp::Log, one + unary(ExprOp::Exp, x)));
}

Expr clamp01(const Expr& x) { return min(max(x, imm(x, 0)), imm(x, 1)); }

Expr gelu(const Expr& x, const Node& n) {
  std::string approximate = n.attr_string("approximate", "none");
  Expr half = imm(x, 0.5), one = imm(x, 1);
  if (approximate == "none") return half * x * (one + unary(ExprOp::Erf, x / imm(x, std::numbers::sqrt2)));
  if (approximate == "tanh") {
    Expr k = imm(x, std::sqrt(2.0 / std::numbers::pi));
    Expr inner = k * (x + imm(x, 0.044715) * x * x * x);
    return half * x * (one + unary(ExprOp::Tanh, inner));
  }
  throw Error(n.label() + ": approximate must be 'none' or 'tanh', got '" + approximate + "'");
}

void add_activations(LoweringRegistry& r) {
  r.add(numeric_unary(
      "Relu", [](const Expr& x, const Node&) { return max(x, imm(x, 0)); },
      [](const Expr& x) { return max(x, imm(x, 0)); }));
  r.add(float_unary("LeakyRelu", [](const Expr& x, const Node& n) {
    return select(x < imm(x, 0), imm(x, n.attr_float("alpha", 0.01)) * x, x);
  }));
  r.add(math_unary("Sigmoid", ExprOp::Sigmoid));
  r.add(float_unary("HardSigmoid", [](const Expr& x, const Node& n) {
    return clamp01(imm(x, n.attr_float("alpha", 0.2)) * x + imm(x, n.attr_float("beta", 0.5)));
  }));
  r.add(float_unary("HardSwish",
                    [](const Expr& x, const Node&) { return x * clamp01(x / imm(x, 6) + imm(x, 0.5)); }));
  r.add(float_unary("Softplus", [](const Expr& x, const Node&) { return softplus(x); }));
  r.add(float_unary("Softsign",
                    [](const Expr& x, const Node&) { return x / (imm(x, 1) + unary(ExprOp::Abs, x)); }));
  r.add(float_unary("Elu", [](const Expr& x, const Node& n) {
    return select(x < imm(x, 0), imm(x, n.attr_float("alpha", 1.0)) * exp_minus_one(x), x);
  }));
  r.add(float_unary("Selu", [](const Expr& x, const Node& n) {
    // The defaults are the float32 values the ONNX spec lists.
    Expr alpha = imm(x, n.attr_float("alpha", 1.67326319217681884765625));
    Expr gamma = imm(x, n.attr_float("gamma", 1.05070102214813232421875));
    return select(x > imm(x, 0), gamma * x, gamma * alpha * exp_minus_one(x));
  }));
  r.add(float_unary("Celu", [](const Expr& x, const Node& n) {
    double alpha = n.attr_float("alpha", 1.0);
    if (alpha == 0) throw Error(n.label() + ": alpha must not be 0");
    Expr a = imm(x, alpha), zero = imm(x, 0);
    return max(zero, x) + min(zero, a * exp_minus_one(x / a));
  }));
  r.add(float_unary("Gelu", gelu));
  r.add(float_unary("Mish", [](const Expr& x, const Node&) { return x * unary(ExprOp::Tanh, softplus(x)); }));
  r.add(float_unary("Swish", [](const Expr& x, const Node& n) {
    return x * unary(ExprOp::Sigmoid, imm(x, n.attr_float("alpha", 1.0)) * x);
  }));
  r.add(float_unary("ThresholdedRelu", [](const Expr& x, const Node& n) {
    return select(x > imm(x, n.attr_float("alpha", 1.0)), x, imm(x, 0));
  }));
  // Shrink takes integers too: like the reference, they go through the float formula (in float64) and
  // the result is truncated back.
  r.add(float_unary("Shrink", [](const Expr& x, const Node& n) {
    double lambd = n.attr_float("lambd", 0.5), bias = n.attr_float("bias", 0.0);
    return select(x < imm(x, -lambd), x + imm(x, bias), select(x > imm(x, lambd), x - imm(x, bias), imm(x, 0)));
  }));
}

// Sign keeps NaN and the sign of zero for floats (x itself is returned when neither x > 0 nor x < 0);
// unsigned integers are never negative.
Expr sign(const Expr& x) {
  Expr zero = imm(x, 0);
  if (!is_float(x->dtype) && !is_signed(x->dtype)) return select(x > zero, imm(x, 1), zero);
  return select(x > zero, imm(x, 1), select(x < zero, imm(x, -1), x));
}

Expr is_inf(const Expr& x, const Node& n) {
  bool positive = n.attr_int("detect_positive", 1) != 0;
  bool negative = n.attr_int("detect_negative", 1) != 0;
  Expr inf = unary(ExprOp::IsInf, x);
  if (positive && negative) return inf;
  if (positive) return inf && x > imm(x, 0);
  if (negative) return inf && x < imm(x, 0);
  return int_imm(0, DType::Bool);
}

void add_math(LoweringRegistry& r) {
  // Erf also takes integers: float_unary widens them to float64 and truncates the result back, as the
  // reference does.
  const std::pair<const char*, ExprOp> plain[] = {
      {"Exp", ExprOp::Exp},     {"Log", ExprOp::Log},     {"Sqrt", ExprOp::Sqrt},   {"Tanh", ExprOp::Tanh},
      {"Erf", ExprOp::Erf},     {"Sin", ExprOp::Sin},     {"Cos", ExprOp::Cos},     {"Tan", ExprOp::Tan},
      {"Asin", ExprOp::Asin},   {"Acos", ExprOp::Acos},   {"Atan", ExprOp::Atan},   {"Sinh", ExprOp::Sinh},
      {"Cosh", ExprOp::Cosh},   {"Asinh", ExprOp::Asinh}, {"Acosh", ExprOp::Acosh}, {"Atanh", ExprOp::Atanh},
      {"Floor", ExprOp::Floor}, {"Ceil", ExprOp::Ceil},   {"Round", ExprOp::Round},  // Round: half to even
  };
  for (const auto& [name, op] : plain) r.add(math_unary(name, op));
  r.add(float_unary("Reciprocal", [](const Expr& x, const Node&) { return imm(x, 1) / x; }));

  r.add(numeric_unary(
      "Neg", [](const Expr& x, const Node&) { return -x; }, [](const Expr& x) { return -x; }));
  r.add(numeric_unary(
      "Abs", [](const Expr& x, const Node&) { return unary(ExprOp::Abs, x); },
      [](const Expr& x) { return is_signed(x->dtype) ? unary(ExprOp::Abs, x) : x; }));
  r.add(numeric_unary(
      "Sign", [](const Expr& x, const Node&) { return sign(x); }, sign));
  // Bool results: computed on the (widened) input, no cast back needed beyond the identity.
  r.add(float_unary("IsNaN", [](const Expr& x, const Node&) { return unary(ExprOp::IsNaN, x); }));
  r.add(float_unary("IsInf", is_inf));
  r.add(int_unary("Not", ExprOp::Not));
  r.add(int_unary("BitwiseNot", ExprOp::BitNot));
}

}  // namespace

void register_elementwise_lowerings(LoweringRegistry& r) {
  add_activations(r);
  add_math(r);
  elementwise::register_binary_lowerings(r);
  elementwise::register_special_lowerings(r);
}

}  // namespace kiln::te
