#include "scheduler/lower/partition_loops.h"

#include <algorithm>
#include <unordered_map>

#include "scheduler/te/affine.h"
#include "scheduler/te/substitute.h"

namespace kiln::lower {

namespace {

using te::ExprNode;
using te::ExprOp;

constexpr size_t kMaxParts = 3;

// A test c * v + k >= 0 (or, with `negated`, < 0) on a loop variable v.
struct BoundTest {
  const ExprNode* node;
  int64_t c, k;
  bool negated;
  bool at(int64_t v) const { return (c * v + k >= 0) != negated; }
  // The first v at which the test's value differs from its value at v - 1.
  int64_t cut() const {
    if (c > 0) return -k >= 0 ? (-k + c - 1) / c : -((k) / c);  // ceil(-k / c)
    const int64_t d = -c;                                        // c * v + k >= 0  <=>  v <= floor(k / d)
    return (k >= 0 ? k / d : -((-k + d - 1) / d)) + 1;
  }
};

// `t` as a bound test on `v`, if it is one.
std::optional<BoundTest> bound_test(const Expr& t, const ExprNode* v) {
  if (t->args.size() != 2 || t->args[0]->dtype != DType::Int64) return std::nullopt;
  int64_t shift = 0;
  bool negated = false;
  switch (t->op) {  // as g >= 0 or g < 0, g = a - b (+ shift)
    case ExprOp::Ge: break;
    case ExprOp::Gt: shift = -1; break;
    case ExprOp::Lt: negated = true; break;
    case ExprOp::Le: shift = -1, negated = true; break;
    default: return std::nullopt;
  }
  const te::Affine f = te::affine_form(t->args[0] - t->args[1]);
  int64_t c = 0;
  for (const auto& [atom, coeff] : f.terms) {
    if (coeff == 0) continue;
    if (atom.get() != v) return std::nullopt;
    c += coeff;
  }
  if (c == 0) return std::nullopt;
  return BoundTest{t.get(), c, f.constant + shift, negated};
}

void and_terms(const Expr& e, std::vector<Expr>& out) {
  if (e->op == ExprOp::And) {
    and_terms(e->args[0], out);
    and_terms(e->args[1], out);
  } else {
    out.push_back(e);
  }
}

// The bound tests on `v` among the conjuncts of every select condition and `if` in `s`.
void collect_tests(const Expr& e, const ExprNode* v, std::vector<BoundTest>& out) {
  if (!e) return;
  if (e->op == ExprOp::Select) {
    std::vector<Expr> terms;
    and_terms(e->args[0], terms);
    for (const Expr& t : terms)
      if (auto b = bound_test(t, v)) out.push_back(*b);
  }
  for (const Expr& a : e->args) collect_tests(a, v, out);
}

void collect_tests(const Stmt& s, const ExprNode* v, std::vector<BoundTest>& out) {
  if (!s) return;
  collect_tests(s->index, v, out);
  collect_tests(s->value, v, out);
  if (s->kind == StmtKind::IfThenElse) {
    std::vector<Expr> terms;
    and_terms(s->cond, terms);
    for (const Expr& t : terms)
      if (auto b = bound_test(t, v)) out.push_back(*b);
  }
  for (const Stmt& b : s->body) collect_tests(b, v, out);
}

std::optional<bool> constant_bool(const Expr& e) {
  if (e->op == ExprOp::IntImm && e->dtype == DType::Bool) return e->int_value != 0;
  return std::nullopt;
}

// `e` with the tests in `value` replaced by their values and the logic around them folded.
class FoldTests {
 public:
  explicit FoldTests(const std::unordered_map<const ExprNode*, bool>& value) : value_(value) {}

  Expr operator()(const Expr& e) {
    if (auto it = value_.find(e.get()); it != value_.end()) return te::int_imm(it->second, DType::Bool);
    if (auto it = done_.find(e.get()); it != done_.end()) return it->second;
    std::vector<Expr> args;
    bool changed = false;
    for (const Expr& a : e->args) {
      args.push_back((*this)(a));
      changed |= args.back() != a;
    }
    Expr out = changed ? fold(*e, std::move(args)) : e;
    done_[e.get()] = out;
    return out;
  }

 private:
  static Expr fold(const ExprNode& n, std::vector<Expr> args) {
    const auto a0 = constant_bool(args[0]);
    const auto a1 = args.size() > 1 ? constant_bool(args[1]) : std::nullopt;
    switch (n.op) {
      case ExprOp::Select:
        if (a0) return *a0 ? args[1] : args[2];
        break;
      case ExprOp::And:
        if (a0) return *a0 ? args[1] : args[0];
        if (a1) return *a1 ? args[0] : args[1];
        break;
      case ExprOp::Or:
        if (a0) return *a0 ? args[0] : args[1];
        if (a1) return *a1 ? args[1] : args[0];
        break;
      case ExprOp::Not:
        if (a0) return te::int_imm(!*a0, DType::Bool);
        break;
      default: break;
    }
    return te::with_args(n, std::move(args));
  }

  const std::unordered_map<const ExprNode*, bool>& value_;
  std::unordered_map<const ExprNode*, Expr> done_;
};

// `s` with every `if` whose condition folded to a constant replaced by the branch it takes.
Stmt fold_ifs(const Stmt& s) {
  if (!s) return s;
  auto n = std::make_shared<StmtNode>(*s);
  for (Stmt& b : n->body) b = fold_ifs(b);
  if (s->kind == StmtKind::IfThenElse)
    if (auto c = constant_bool(n->cond)) return *c ? n->body[0] : (n->body.size() > 1 && n->body[1] ? n->body[1] : block({}));
  return n;
}

Stmt partition(const Stmt& s);

// The loop `loop` (its body partitioned already) split at its tests' cut points.
Stmt partition_loop(const Stmt& loop) {
  const ExprNode* v = loop->var.get();
  std::vector<BoundTest> tests;
  collect_tests(loop->body[0], v, tests);
  if (tests.empty()) return loop;
  std::vector<int64_t> cuts = {0, loop->extent};
  for (const BoundTest& t : tests) cuts.push_back(std::clamp<int64_t>(t.cut(), 0, loop->extent));
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  if (cuts.size() - 1 > kMaxParts) return loop;
  std::vector<Stmt> parts;
  for (size_t p = 0; p + 1 < cuts.size(); ++p) {
    const int64_t from = cuts[p], to = cuts[p + 1];
    std::unordered_map<const ExprNode*, bool> value;
    for (const BoundTest& t : tests) value[t.node] = t.at(from);
    FoldTests fold(value);
    Stmt body = fold_ifs(map_exprs(loop->body[0], [&](const Expr& e) { return fold(e); }));
    if (body->kind == StmtKind::Block && body->body.empty()) continue;  // an if not taken on this part
    Expr var = te::var(loop->var->name);
    body = substitute_stmt(body, {{v, from == 0 ? var : var + te::int_imm(from)}});
    parts.push_back(for_loop(var, to - from, loop->for_kind, body));
  }
  return parts.size() == 1 ? parts[0] : block(std::move(parts));  // none left: an empty block
}

Stmt partition(const Stmt& s) {
  if (!s) return s;
  auto n = std::make_shared<StmtNode>(*s);
  for (Stmt& b : n->body) b = partition(b);
  const bool gpu = s->for_kind == ForKind::GpuBlock || s->for_kind == ForKind::GpuThread;
  if (s->kind != StmtKind::For || gpu || s->extent < 2) return n;
  return partition_loop(n);
}

}  // namespace

Stmt partition_guarded_loops(const Stmt& s) { return partition(s); }

}  // namespace kiln::lower
