// Elementwise ops as tensor expressions, binary part: arithmetic, Pow, Mod, comparisons, logic, bitwise
// ops and the variadic Min/Max/Sum/Mean. All broadcast numpy-style; the formulas mirror
// frontend/ops/elementwise_binary.cc.
#include "scheduler/te/ops/elementwise_lowering_common.h"

namespace kiln::te::elementwise {
namespace {

// z = a op b. Float operands are widened to their compute dtype and the result cast back; integer (and
// bool) operands use the op directly, which wraps like the reference's uint64 arithmetic. Comparisons
// produce bool either way; widening is exact, so they compare the same values.
Expr apply(ExprOp op, const Expr& a, const Expr& b, DType out) {
  if (is_float(a->dtype)) return cast(out, binary(op, widen(a), widen(b)));
  return cast(out, binary(op, a, b));
}

OpLowering binary_lowering(const std::string& op_type, ExprOp op) {
  return {op_type, "", [op](LowerContext& c) {
            set_broadcast_output(c, [&](const std::vector<Expr>& v) { return apply(op, v[0], v[1], c.out_dtype(0)); });
          }};
}

// fmod=1: the remainder takes the dividend's sign (C's fmod / %); fmod=0: the divisor's (Python's %),
// which is FloorMod for floats and signed integers alike, and plain % for unsigned ones.
void lower_mod(LowerContext& c) {
  int64_t fmod_attr = c.node().attr_int("fmod", 0);
  if (fmod_attr != 0 && fmod_attr != 1) c.fail("fmod must be 0 or 1");
  DType t = c.dtype(0);
  ExprOp op = fmod_attr == 0 ? ExprOp::FloorMod : is_float(t) ? ExprOp::FMod : ExprOp::Mod;
  set_broadcast_output(c, [&](const std::vector<Expr>& v) { return apply(op, v[0], v[1], c.out_dtype(0)); });
}

void lower_bitshift(LowerContext& c) {
  std::string direction = c.node().attr_string("direction", "");
  if (direction != "LEFT" && direction != "RIGHT") c.fail("direction must be \"LEFT\" or \"RIGHT\"");
  ExprOp op = direction == "LEFT" ? ExprOp::Shl : ExprOp::Shr;
  set_broadcast_output(c, [&](const std::vector<Expr>& v) { return binary(op, v[0], v[1]); });
}

// base ** exponent over integers, as the reference's integer_pow: Pow wraps, and a negative exponent
// gives 0 unless |base| is 1. Both go through int64 (the wrapped low bits are the same); an unsigned
// base is never -1, which matters only for uint64, whose int64 view of 2^64-1 is -1.
Expr integer_pow(const Expr& base, const Expr& exponent) {
  Expr b = cast(DType::Int64, base), e = cast(DType::Int64, exponent);
  Expr p = binary(ExprOp::Pow, b, e);
  if (base->dtype == DType::UInt64 && is_signed(exponent->dtype))
    p = select(e < int_imm(0), select(eq(b, int_imm(1)), int_imm(1), int_imm(0)), p);
  return cast(base->dtype, p);
}

// Pow: the exponent may have another dtype (opset 12+); the result has the base's dtype. With a float on
// either side the reference computes std::pow in double and truncates for integer bases.
void lower_pow(LowerContext& c) {
  set_broadcast_output(c, [&](const std::vector<Expr>& v) {
    const Expr& x = v[0];
    const Expr& y = v[1];
    if (!is_float(x->dtype) && !is_float(y->dtype)) return integer_pow(x, y);
    DType ct = is_float(x->dtype) ? float_compute_dtype(x->dtype) : DType::Float64;
    return cast(c.out_dtype(0), binary(ExprOp::Pow, cast(ct, x), cast(ct, y)));
  });
}

// Min, Max, Sum, Mean: one or more inputs folded left to right; Mean divides the sum by the count.
// Folding in the compute dtype skips the reference's rounding of each partial result to float16.
OpLowering variadic_lowering(const std::string& op_type, ExprOp op, bool is_mean = false) {
  return {op_type, "", [op, is_mean](LowerContext& c) {
            set_broadcast_output(c, [&](const std::vector<Expr>& v) {
              bool floats = is_float(v[0]->dtype);
              Expr acc = floats ? widen(v[0]) : v[0];
              for (size_t i = 1; i < v.size(); ++i) acc = binary(op, acc, floats ? widen(v[i]) : v[i]);
              if (is_mean) acc = acc / imm(acc, static_cast<double>(v.size()));
              return cast(c.out_dtype(0), acc);
            });
          }};
}

}  // namespace

void register_binary_lowerings(LoweringRegistry& r) {
  r.add(binary_lowering("Add", ExprOp::Add));
  r.add(binary_lowering("Sub", ExprOp::Sub));
  r.add(binary_lowering("Mul", ExprOp::Mul));
  // Integer Div truncates toward zero, as ONNX requires; INT64_MIN / -1 wraps.
  r.add(binary_lowering("Div", ExprOp::Div));
  r.add({"Mod", "", lower_mod});
  r.add({"Pow", "", lower_pow});

  r.add(variadic_lowering("Min", ExprOp::Min));  // NaN-propagating, like numpy's minimum
  r.add(variadic_lowering("Max", ExprOp::Max));
  r.add(variadic_lowering("Sum", ExprOp::Add));
  r.add(variadic_lowering("Mean", ExprOp::Add, true));

  r.add(binary_lowering("Equal", ExprOp::Eq));
  r.add(binary_lowering("Greater", ExprOp::Gt));
  r.add(binary_lowering("Less", ExprOp::Lt));
  r.add(binary_lowering("GreaterOrEqual", ExprOp::Ge));
  r.add(binary_lowering("LessOrEqual", ExprOp::Le));

  r.add(binary_lowering("And", ExprOp::And));
  r.add(binary_lowering("Or", ExprOp::Or));
  r.add(binary_lowering("Xor", ExprOp::Xor));

  r.add(binary_lowering("BitwiseAnd", ExprOp::BitAnd));
  r.add(binary_lowering("BitwiseOr", ExprOp::BitOr));
  r.add(binary_lowering("BitwiseXor", ExprOp::BitXor));
  r.add({"BitShift", "", lower_bitshift});
}

}  // namespace kiln::te::elementwise
