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

bool mentions(const Expr& e, const ExprNode* v) {
  if (e.get() == v) return true;
  for (const Expr& a : e->args)
    if (mentions(a, v)) return true;
  return false;
}

void visit_loads(const Expr& e, const std::function<void(const Expr& load)>& f) {
  if (!e) return;
  if (e->op == ExprOp::Load) f(e);
  for (const Expr& a : e->args) visit_loads(a, f);
}

}  // namespace kiln::te
