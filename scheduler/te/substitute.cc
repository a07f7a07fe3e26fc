#include "scheduler/te/substitute.h"

namespace kiln::te {

Expr with_args(const ExprNode& n, std::vector<Expr> args) {
  auto copy = std::make_shared<ExprNode>(n);
  copy->args = std::move(args);
  return copy;
}

namespace {

Expr rebuild_args(const Expr& e, const std::function<Expr(const Expr&)>& f) {
  if (e->args.empty()) return e;
  std::vector<Expr> args;
  bool changed = false;
  for (const Expr& a : e->args) {
    args.push_back(f(a));
    changed = changed || args.back() != a;
  }
  return changed ? with_args(*e, std::move(args)) : e;
}

}  // namespace

Expr substitute(const Expr& e, const std::map<const ExprNode*, Expr>& m) {
  if (!e || m.empty()) return e;
  if (e->op == ExprOp::Var) {
    auto it = m.find(e.get());
    return it == m.end() ? e : it->second;
  }
  return rebuild_args(e, [&](const Expr& a) { return substitute(a, m); });
}

Expr rewrite_loads(const Expr& e, const std::function<Expr(const Expr& load)>& f) {
  if (!e) return e;
  Expr r = rebuild_args(e, [&](const Expr& a) { return rewrite_loads(a, f); });
  if (r->op != ExprOp::Load) return r;
  Expr repl = f(r);
  return repl ? repl : r;
}

namespace {
bool mentions_node(const ExprNode* e, const ExprNode* v) {
  if (e == v) return true;
  for (const Expr& a : e->args)
    if (mentions_node(a.get(), v)) return true;
  return false;
}
}  // namespace

bool mentions(const Expr& e, const ExprNode* v) { return mentions_node(e.get(), v); }

std::optional<int64_t> linear_coeff(const ExprNode* e, const ExprNode* v) {
  if (e == v) return 1;
  if (!mentions_node(e, v)) return 0;
  if (e->op == ExprOp::Add || e->op == ExprOp::Sub) {
    auto a = linear_coeff(e->args[0].get(), v), b = linear_coeff(e->args[1].get(), v);
    if (!a || !b) return std::nullopt;
    return e->op == ExprOp::Add ? *a + *b : *a - *b;
  }
  if (e->op == ExprOp::Mul) {
    const ExprNode* x = e->args[0].get();
    const ExprNode* y = e->args[1].get();
    if (y->op == ExprOp::IntImm) std::swap(x, y);
    if (x->op != ExprOp::IntImm) return std::nullopt;
    auto c = linear_coeff(y, v);
    if (!c) return std::nullopt;
    return *c * x->int_value;
  }
  return std::nullopt;
}

void visit_loads(const Expr& e, const std::function<void(const Expr& load)>& f) {
  if (!e) return;
  if (e->op == ExprOp::Load) f(e);
  for (const Expr& a : e->args) visit_loads(a, f);
}

}  // namespace kiln::te
