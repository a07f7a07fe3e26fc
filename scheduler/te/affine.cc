#include "scheduler/te/affine.h"

namespace kiln::te {

void Affine::add(const Expr& atom, int64_t coeff) {
  for (auto& [a, c] : terms)
    if (same_expr(a, atom)) {
      c += coeff;
      return;
    }
  terms.emplace_back(atom, coeff);
}

namespace {

void unfold(const Expr& e, int64_t scale, Affine& out) {
  const auto constant = [](const Expr& x) { return x->op == ExprOp::IntImm; };
  switch (e->op) {
    case ExprOp::IntImm: out.constant += scale * e->int_value; return;
    case ExprOp::Add: unfold(e->args[0], scale, out), unfold(e->args[1], scale, out); return;
    case ExprOp::Sub: unfold(e->args[0], scale, out), unfold(e->args[1], -scale, out); return;
    case ExprOp::Neg: unfold(e->args[0], -scale, out); return;
    case ExprOp::Mul:
      if (constant(e->args[1])) return unfold(e->args[0], scale * e->args[1]->int_value, out);
      if (constant(e->args[0])) return unfold(e->args[1], scale * e->args[0]->int_value, out);
      break;
    case ExprOp::FloorDiv:
    case ExprOp::Div:
      if (constant(e->args[1]) && e->args[1]->int_value == 1) return unfold(e->args[0], scale, out);
      break;
    default: break;
  }
  out.add(e, scale);
}

}  // namespace

Affine affine_form(const Expr& e) {
  Affine a;
  unfold(e, 1, a);
  return a;
}

}  // namespace kiln::te
