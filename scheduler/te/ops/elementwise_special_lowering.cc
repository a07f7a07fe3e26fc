// Elementwise ops that fit neither the unary nor the binary pattern, as tensor expressions: Cast, CastLike,
// Clip, Where, PRelu. The formulas mirror frontend/ops/elementwise_special.cc.
#include <limits>

#include "scheduler/te/narrow_codes.h"
#include "scheduler/te/ops/elementwise_lowering_common.h"

namespace kiln::te::elementwise {
namespace {

// Cast's conversions (float to integer truncating toward zero, anything to bool testing != 0, integers
// wrapping) are exactly the expression language's cast. CastLike reads only input 1's dtype, which is
// already the output dtype, so input 1 is never loaded.
void lower_cast(LowerContext& c) {
  const DType from = c.graph_dtype(0), to = c.out_graph_dtype(0);
  if (!is_narrow(from) && !is_narrow(to)) {
    set_mapped_output(c, "elementwise", {0}, [&](const std::vector<Expr>& v) { return cast(c.out_dtype(0), v[0]); });
    return;
  }
  // The narrow types: the source as a number (codes decoded), then the target's conversion, with
  // frontend/ops/elementwise_special.cc's rules (narrow_codes.h builds them).
  const NarrowCastRule rule = narrow_cast_rule(c.node());
  set_mapped_output(c, "elementwise", {0}, [&](const std::vector<Expr>& v) {
    Expr x = v[0];
    if (is_narrow_float(from)) x = narrow_to_float(x, from);
    else if (is_narrow_int(from)) x = narrow_to_int(x, from);
    if (is_narrow_float(to)) return float_to_narrow(cast(DType::Float32, x), to, rule.saturate, rule.power);
    if (is_narrow_int(to)) return to_narrow_int(x, to);
    return cast(c.out_dtype(0), x);
  });
}

// Clamps like the reference: `v < lo ? lo : v`, then `v > hi ? hi : v` (std::max / std::min and
// clamp_int), so NaN passes through and lo > hi gives hi. Comparisons are exact in any dtype.
Expr clamp(const Expr& v, const Expr& lo, const Expr& hi) {
  Expr r = v;
  if (lo) r = select(r < lo, lo, r);
  if (hi) r = select(r > hi, hi, r);
  return r;
}

// The scalar value of a bound input: a rank-0 tensor or a one-element 1-D one (see check_clip_bound).
Expr scalar_at(const TensorRef& t) { return at(t, std::vector<Expr>(t->shape.size(), int_imm(0))); }

// Clip: bounds are attributes min/max (defaulting to float32's extremes) before opset 11 and optional
// scalar inputs 1 and 2 from then on, where an absent bound means none.
void lower_clip(LowerContext& c) {
  Expr lo, hi;
  DType t = c.dtype(0);
  if (c.opset() < 11) {
    if (!is_float(t)) c.unsupported("Clip before opset 11 takes float dtypes");
    DType ct = float_compute_dtype(t);
    lo = const_of(ct, c.node().attr_float("min", std::numeric_limits<float>::lowest()));
    hi = const_of(ct, c.node().attr_float("max", std::numeric_limits<float>::max()));
  } else {
    auto bound = [&](size_t i) -> Expr {
      if (!c.has_input(i)) return nullptr;
      Expr b = scalar_at(c.input(i));
      return is_float(t) ? widen(b) : b;
    };
    lo = bound(1);
    hi = bound(2);
  }
  set_mapped_output(c, "elementwise", {0}, [&](const std::vector<Expr>& v) {
    return cast(c.out_dtype(0), clamp(is_float(t) ? widen(v[0]) : v[0], lo, hi));
  });
}

// Where: X or Y by the condition, all three broadcast together. Only the chosen value is read.
void lower_where(LowerContext& c) {
  set_broadcast_output(c, [](const std::vector<Expr>& v) { return select(v[0], v[1], v[2]); });
}

// PRelu: x < 0 ? slope * x : x, slope broadcast onto X's shape (the output's). Unsigned x is never below
// zero, so the same formula leaves it unchanged; signed integers multiply with wrapping.
void lower_prelu(LowerContext& c) {
  set_broadcast_output(c, [&](const std::vector<Expr>& v) {
    bool floats = is_float(v[0]->dtype);
    Expr x = floats ? widen(v[0]) : v[0];
    Expr slope = floats ? widen(v[1]) : v[1];
    return cast(c.out_dtype(0), select(x < imm(x, 0), slope * x, x));
  });
}

}  // namespace

void register_special_lowerings(LoweringRegistry& r) {
  r.add({"Cast", "", lower_cast});
  r.add({"CastLike", "", lower_cast});
  r.add({"Clip", "", lower_clip});
  r.add({"Where", "", lower_where});
  r.add({"PRelu", "", lower_prelu});
}

}  // namespace kiln::te::elementwise
