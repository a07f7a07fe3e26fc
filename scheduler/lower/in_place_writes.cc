#include "scheduler/lower/in_place_writes.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>

#include "scheduler/lower/z3_terms.h"
#include "scheduler/te/affine.h"

namespace kiln::lower {
namespace {

using te::ExprOp;

// Where an access sits: the loops around it, outermost first, and the conditions of the if-statements
// around it (with whether it is in the then-branch).
struct Context {
  std::vector<Stmt> loops;
  std::vector<std::pair<Expr, bool>> guards;
};

struct StoreSite {
  Stmt store;
  Context at;
};

struct LoadSite {
  const te::TensorNode* buffer;
  Expr index;
  int store = -1;  // the store whose value holds it (index into Accesses::stores), -1 for none
  Context at;
};

// Every global access of one statement.
struct Accesses {
  std::vector<StoreSite> stores;
  std::vector<LoadSite> loads;
  std::set<const te::TensorNode*> called;  // arguments of runtime-kernel calls
};

class Collector {
 public:
  Accesses found;

  void stmt(const Stmt& s) {
    if (!s) return;
    switch (s->kind) {
      case StmtKind::For:
        at_.loops.push_back(s);
        stmt(s->body[0]);
        at_.loops.pop_back();
        return;
      case StmtKind::Store: {
        expr(s->index, -1);
        found.stores.push_back({s, at_});
        expr(s->value, static_cast<int>(found.stores.size()) - 1);
        return;
      }
      case StmtKind::IfThenElse:
        expr(s->cond, -1);
        at_.guards.push_back({s->cond, true});
        stmt(s->body[0]);
        at_.guards.back().second = false;
        if (s->body.size() > 1) stmt(s->body[1]);
        at_.guards.pop_back();
        return;
      case StmtKind::Allocate:
      case StmtKind::Block:
        for (const Stmt& b : s->body) stmt(b);
        return;
      case StmtKind::ExternCall:
        for (const BufferRef& b : s->args)
          if (b) found.called.insert(b->node.get());
        return;
      case StmtKind::Prefetch:  // changes no value
      case StmtKind::Barrier: return;
    }
  }

 private:
  Context at_;

  void expr(const Expr& e, int store) {
    if (!e) return;
    if (e->op == ExprOp::Load && e->args.size() == 1) found.loads.push_back({e->tensor.get(), e->args[0], store, at_});
    for (const Expr& a : e->args) expr(a, store);
  }
};

// Whether `e` reads no memory and names no variable but the loops of `at`: Z3 then sees all of it, so
// two iterations' values of it are not tied together through a shared unknown.
bool closed(const Expr& e, const Context& at) {
  if (!e) return true;
  if (e->op == ExprOp::Load) return false;
  if (e->op == ExprOp::Var) {
    for (const Stmt& loop : at.loops)
      if (loop->var.get() == e.get()) return true;
    return false;
  }
  for (const Expr& a : e->args)
    if (!closed(a, at)) return false;
  return true;
}

// A solver that gives up (then the pair is not proven) rather than hold up a compile.
constexpr unsigned kZ3TimeoutMs = 2000;

// Declares one Z3 constant per loop of `at` in z.vars (replacing what was there), with its range and
// the conditions around it that are closed (over its loops alone) as facts; returns the constants. A
// condition on anything else is left out: one unknown shared by two iterations' facts could tie them
// together where the program does not.
std::vector<z3::expr> state_context(Z3Terms& z, z3::solver& solver, const Context& at, const char* tag) {
  z.vars.clear();
  std::vector<z3::expr> vars;
  for (const Stmt& loop : at.loops) {
    z3::expr v = z.ctx.int_const(fmt::format("{}{}#{}", tag, loop->var->name, vars.size()).c_str());
    z.vars.emplace(loop->var.get(), v);
    vars.push_back(v);
    solver.add(v >= 0 && v < z.ctx.int_val(static_cast<int64_t>(loop->extent)));
  }
  for (const auto& [cond, then_branch] : at.guards)
    if (closed(cond, at))
      if (auto c = z.boolean(cond)) solver.add(then_branch ? *c : !*c);
  return vars;
}

z3::solver make_solver(Z3Terms& z) {
  z3::solver solver(z.ctx);
  z3::params timeout(z.ctx);
  timeout.set("timeout", kZ3TimeoutMs);
  solver.set(timeout);
  return solver;
}

// Whether the load reads the element its store writes, at every iteration around them.
bool reads_the_written_element(const LoadSite& load, const StoreSite& store) {
  if (load.index->dtype == store.store->index->dtype) {
    const te::Affine d = te::affine_form(load.index - store.store->index);
    bool zero = d.constant == 0;
    for (const auto& [atom, c] : d.terms) zero = zero && c == 0;
    if (zero) return true;
  }
  if (!closed(load.index, load.at) || !closed(store.store->index, store.at)) return false;
  Z3Terms z;
  z3::solver solver = make_solver(z);
  state_context(z, solver, store.at, "");
  auto l = z.integer(load.index), s = z.integer(store.store->index);
  if (!l || !s) return false;
  solver.add(*l != *s);
  return solver.check() == z3::unsat;
}

// Whether two executions of the stores x and y (of x at two different iterations when they are one)
// may write one index.
bool may_write_one_index(const StoreSite& x, const StoreSite& y) {
  if (!closed(x.store->index, x.at) || !closed(y.store->index, y.at)) return true;
  Z3Terms z;
  z3::solver solver = make_solver(z);
  const std::vector<z3::expr> xv = state_context(z, solver, x.at, "a.");
  const auto xi = z.integer(x.store->index);
  const std::vector<z3::expr> yv = state_context(z, solver, y.at, "b.");
  const auto yi = z.integer(y.store->index);
  if (!xi || !yi) return true;
  solver.add(*xi == *yi);
  if (&x == &y) {
    if (xv.empty()) return false;  // outside every loop: it runs once
    z3::expr_vector differ(z.ctx);
    for (size_t k = 0; k < xv.size(); ++k) differ.push_back(xv[k] != yv[k]);
    solver.add(z3::mk_or(differ));
  }
  return solver.check() != z3::unsat;
}

// Conditions 1-3 of the header for reading `a` and writing `b` in the statement whose accesses are `acc`.
bool proven_in_place(const Accesses& acc, const te::TensorNode* a, const te::TensorNode* b) {
  if (acc.called.count(a) || acc.called.count(b)) return false;
  std::vector<const StoreSite*> b_stores;
  for (const StoreSite& s : acc.stores) {
    if (s.store->buffer->node.get() == a) return false;  // it writes the input too
    if (s.store->buffer->node.get() == b) b_stores.push_back(&s);
  }
  for (const LoadSite& l : acc.loads) {
    if (l.buffer == b) return false;
    if (l.buffer != a) continue;
    if (l.store < 0) return false;
    const StoreSite& s = acc.stores[static_cast<size_t>(l.store)];
    if (s.store->buffer->node.get() != b || !reads_the_written_element(l, s)) return false;
  }
  for (size_t i = 0; i < b_stores.size(); ++i)
    for (size_t j = i; j < b_stores.size(); ++j)
      if (may_write_one_index(*b_stores[i], *b_stores[j])) return false;
  return true;
}

}  // namespace

std::vector<InPlaceWrite> find_in_place_writes(const ModelProgram& p) {
  std::map<const te::TensorNode*, size_t> param_of;
  for (size_t i = 0; i < p.func.params.size(); ++i) param_of[p.func.params[i]->node.get()] = i;
  std::set<const Buffer*> hosts;  // buffers with a view inside them
  for (const ModelParam& m : p.params)
    if (m.within) hosts.insert(m.within.get());
  auto plain_workspace = [&](size_t i) {
    return p.params[i].kind == ModelParam::Kind::Workspace && !p.params[i].within && !hosts.count(p.func.params[i].get());
  };
  const std::vector<Stmt> statements =
      p.func.body && p.func.body->kind == StmtKind::Block ? p.func.body->body : std::vector<Stmt>{p.func.body};
  std::vector<InPlaceWrite> writes;
  for (size_t s = 0; s < statements.size() && s < p.statement_step.size(); ++s) {
    const int step = p.statement_step[s];
    if (step < 0) continue;
    Collector c;
    c.stmt(statements[s]);
    std::set<size_t> dying, born;
    for (const LoadSite& l : c.found.loads)
      if (auto it = param_of.find(l.buffer); it != param_of.end() && plain_workspace(it->second) && p.params[it->second].last_step == step)
        dying.insert(it->second);
    for (const StoreSite& st : c.found.stores)
      if (auto it = param_of.find(st.store->buffer->node.get());
          it != param_of.end() && plain_workspace(it->second) && p.params[it->second].first_step == step)
        born.insert(it->second);
    for (size_t a : dying)
      for (size_t b : born) {
        const Buffer& ab = *p.func.params[a];
        const Buffer& bb = *p.func.params[b];
        if (a == b || ab.dtype != bb.dtype || ab.size != bb.size) continue;
        if (proven_in_place(c.found, ab.node.get(), bb.node.get())) writes.push_back({a, b, s});
      }
  }
  return writes;
}

std::string print_in_place_writes(const ModelProgram& p, const std::vector<InPlaceWrite>& writes) {
  std::string out;
  for (const InPlaceWrite& w : writes)
    out += fmt::format("{} over {} (statement {})\n", p.func.params[w.written]->name, p.func.params[w.read]->name, w.statement);
  return out;
}

}  // namespace kiln::lower
