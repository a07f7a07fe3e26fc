#include "scheduler/lower/z3_terms.h"

#include <fmt/format.h>

namespace kiln::lower {

using te::ExprOp;

z3::expr Z3Terms::unknown(const te::Expr& e, bool boolean) {
  for (const auto& [x, term] : unknowns_)
    if (te::same_expr(x, e)) return term;
  const std::string name = fmt::format("free{}", unknowns_.size());
  z3::expr t = boolean ? ctx.bool_const(name.c_str()) : ctx.int_const(name.c_str());
  unknowns_.emplace_back(e, t);
  return t;
}

std::optional<z3::expr> Z3Terms::integer(const te::Expr& e) {
  if (!e || !is_integer(e->dtype) || e->dtype == DType::Bool) return std::nullopt;
  switch (e->op) {
    case ExprOp::IntImm: return ctx.int_val(static_cast<int64_t>(e->int_value));
    case ExprOp::Var: {
      auto it = vars.find(e.get());
      return it != vars.end() ? it->second : unknown(e);
    }
    case ExprOp::Cast: {
      if (!is_integer(e->args[0]->dtype) || e->args[0]->dtype == DType::Bool) return unknown(e);
      return integer(e->args[0]);
    }
    case ExprOp::Neg: {
      auto a = integer(e->args[0]);
      return a ? std::optional<z3::expr>(-*a) : unknown(e);
    }
    case ExprOp::Select: {
      auto a = integer(e->args[1]), b = integer(e->args[2]);
      if (!a || !b) return unknown(e);
      return z3::ite(condition(e->args[0]), *a, *b);
    }
    default: break;
  }
  if (!te::is_binary(e->op) || te::is_comparison(e->op)) return unknown(e);
  auto a = integer(e->args[0]), b = integer(e->args[1]);
  if (!a || !b) return unknown(e);
  const bool positive_constant = e->args[1]->op == ExprOp::IntImm && e->args[1]->int_value > 0;
  switch (e->op) {
    case ExprOp::Add: return *a + *b;
    case ExprOp::Sub: return *a - *b;
    case ExprOp::Mul: return *a * *b;
    case ExprOp::Min: return z3::ite(*a <= *b, *a, *b);
    case ExprOp::Max: return z3::ite(*a >= *b, *a, *b);
    // SMT-LIB's div and mod are Euclidean: floor division and a non-negative remainder for a
    // positive divisor, as floordiv and floormod.
    case ExprOp::FloorDiv:
      if (positive_constant) return z3::expr(ctx, Z3_mk_div(ctx, *a, *b));
      return unknown(e);
    case ExprOp::FloorMod:
      if (positive_constant) return z3::expr(ctx, Z3_mk_mod(ctx, *a, *b));
      return unknown(e);
    case ExprOp::Div:  // truncating: floor division where the dividend is not negative
      if (positive_constant) return z3::ite(*a >= 0, z3::expr(ctx, Z3_mk_div(ctx, *a, *b)), -z3::expr(ctx, Z3_mk_div(ctx, -*a, *b)));
      return unknown(e);
    case ExprOp::Mod:
      if (positive_constant) return z3::ite(*a >= 0, z3::expr(ctx, Z3_mk_mod(ctx, *a, *b)), -z3::expr(ctx, Z3_mk_mod(ctx, -*a, *b)));
      return unknown(e);
    default: return unknown(e);
  }
}

z3::expr Z3Terms::condition(const te::Expr& e) {
  auto c = boolean(e);
  return c ? *c : unknown(e, true);
}

std::optional<z3::expr> Z3Terms::boolean(const te::Expr& e) {
  if (!e) return std::nullopt;
  switch (e->op) {
    case ExprOp::And:
    case ExprOp::Or: {
      auto a = boolean(e->args[0]), b = boolean(e->args[1]);
      if (!a || !b) return std::nullopt;
      return e->op == ExprOp::And ? (*a && *b) : (*a || *b);
    }
    case ExprOp::Not: {
      auto a = boolean(e->args[0]);
      return a ? std::optional<z3::expr>(!*a) : std::nullopt;
    }
    default: break;
  }
  if (!te::is_comparison(e->op)) return std::nullopt;
  auto a = integer(e->args[0]), b = integer(e->args[1]);
  if (!a || !b) return std::nullopt;
  switch (e->op) {
    case ExprOp::Lt: return *a < *b;
    case ExprOp::Le: return *a <= *b;
    case ExprOp::Gt: return *a > *b;
    case ExprOp::Ge: return *a >= *b;
    case ExprOp::Eq: return *a == *b;
    case ExprOp::Ne: return *a != *b;
    default: return std::nullopt;
  }
}

}  // namespace kiln::lower
