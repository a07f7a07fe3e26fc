#include "frontend/subst/verifier.h"

#include <z3++.h>

#include <map>
#include <set>

#include "frontend/ir/error.h"
#include "frontend/subst/axioms.h"

namespace kiln::subst {
namespace {

// Leaves that stand for one fixed tensor each, not for any tensor.
bool is_constant_leaf(const std::string& name) {
  static const std::set<std::string> constants = {"I_matmul", "I_conv", "C_pool", "ones"};
  return constants.count(name) != 0;
}

// The operators as uninterpreted functions over one tensor sort, with their parameters as integers.
class Encoding {
 public:
  explicit Encoding(z3::context& c) : c_(c), tensor_(c.uninterpreted_sort("Tensor")) {
    const z3::sort t = tensor_, i = c.int_sort();
    f_.emplace("ewadd", c.function("ewadd", t, t, t));
    f_.emplace("ewmul", c.function("ewmul", t, t, t));
    f_.emplace("smul", c.function("smul", t, t, t));
    f_.emplace("matmul", c.function("matmul", t, t, t));
    f_.emplace("transpose", c.function("transpose", t, t));
    f_.emplace("relu", c.function("relu", t, t));
    f_.emplace("pool_avg", c.function("pool_avg", t, t));
    f_.emplace("pool_max", c.function("pool_max", t, t));
    f_.emplace("enlarge", c.function("enlarge", i, t, t));
    f_.emplace("concat", c.function("concat", i, t, t, t));
    f_.emplace("split0", c.function("split0", i, i, t, t));
    f_.emplace("split1", c.function("split1", i, i, t, t));
    f_.emplace("extent", c.function("extent", i, t, i));
    z3::sort_vector conv_args(c);
    for (int k = 0; k < 3; ++k) conv_args.push_back(i);  // same, relu, group
    conv_args.push_back(t);
    conv_args.push_back(t);
    f_.emplace("conv", c.function("conv", conv_args, t));
  }

  const z3::sort& tensor() const { return tensor_; }

  // `t` with its leaves looked up in `leaves` (split points of -1 become the extent of leaf x).
  z3::expr encode(const TermRef& t, std::map<std::string, z3::expr>& leaves) {
    if (t->op == "leaf") {
      auto it = leaves.find(t->name);
      if (it == leaves.end()) it = leaves.emplace(t->name, c_.constant(t->name.c_str(), tensor_)).first;
      return it->second;
    }
    std::vector<z3::expr> a;
    for (const TermRef& arg : t->args) a.push_back(encode(arg, leaves));
    const std::string& op = t->op;
    const z3::func_decl& f = f_.at(op);
    if (op == "concat") return f(c_.int_val(t->axis), a[0], a[1]);
    if (op == "split0" || op == "split1") {
      const z3::expr at = t->split_at >= 0 ? c_.int_val(t->split_at) : f_.at("extent")(c_.int_val(t->axis), leaves.at("x"));
      return f(c_.int_val(t->axis), at, a[0]);
    }
    if (op == "enlarge") return f(c_.int_val(t->from), a[0]);
    if (op == "conv") {
      z3::expr_vector args(c_);
      args.push_back(c_.int_val(t->same ? 1 : 0));
      args.push_back(c_.int_val(t->relu ? 1 : 0));
      args.push_back(c_.int_val(t->group));
      args.push_back(a[0]);
      args.push_back(a[1]);
      return f(args);
    }
    if (a.size() == 1) return f(a[0]);
    return f(a[0], a[1]);
  }

  // Axiom `a` as a formula: its leaves bound by a universal quantifier, its constants free.
  z3::expr axiom(const Axiom& a) {
    std::map<std::string, z3::expr> leaves;
    z3::expr_vector bound(c_);
    std::set<std::string> names;
    for (const TermRef& side : {a.lhs, a.rhs})
      for (const std::string& l : subst::leaves(side)) names.insert(l);
    for (const std::string& l : names) {
      const z3::expr v = is_constant_leaf(l) ? constant(l) : c_.constant(("q_" + l).c_str(), tensor_);
      leaves.emplace(l, v);
      if (!is_constant_leaf(l)) bound.push_back(v);
    }
    const z3::expr eq = encode(a.lhs, leaves) == encode(a.rhs, leaves);
    return bound.empty() ? eq : z3::forall(bound, eq);
  }

 private:
  z3::expr constant(const std::string& name) { return c_.constant(name.c_str(), tensor_); }

  z3::context& c_;
  z3::sort tensor_;
  std::map<std::string, z3::func_decl> f_;
};

}  // namespace

bool prove(const TermRef& lhs, const TermRef& rhs, const VerifyOptions& o) {
  z3::context c;
  Encoding e(c);
  z3::solver s(c);
  z3::params p(c);
  p.set("rlimit", o.rlimit);
  s.set(p);
  for (const Axiom& a : axioms()) s.add(e.axiom(a));
  std::map<std::string, z3::expr> leaves;
  s.add(e.encode(lhs, leaves) != e.encode(rhs, leaves));
  return s.check() == z3::unsat;
}

VerifyResult verify_candidates(const std::vector<Candidate>& candidates, const VerifyOptions& o) {
  VerifyResult r;
  for (const Candidate& c : candidates) {
    if (prove(c.lhs, c.rhs, o)) r.proved.push_back(c);
    else ++r.unproved;
  }
  return r;
}

}  // namespace kiln::subst
