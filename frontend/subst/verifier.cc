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
    f_.emplace("biasadd", c.function("biasadd", t, t, t));
    f_.emplace("relu", c.function("relu", t, t));
    f_.emplace("pool_avg", c.function("pool_avg", t, t));
    f_.emplace("pool_max", c.function("pool_max", t, t));
    f_.emplace("enlarge", c.function("enlarge", i, t, t));
    f_.emplace("concat", c.function("concat", i, t, t, t));
    f_.emplace("split0", c.function("split0", i, i, t, t));
    f_.emplace("split1", c.function("split1", i, i, t, t));
    f_.emplace("extent", c.function("extent", i, t, i));
    z3::sort_vector conv_args(c);
    for (int k = 0; k < 4; ++k) conv_args.push_back(i);  // same, relu, group, stride
    conv_args.push_back(t);
    conv_args.push_back(t);
    f_.emplace("conv", c.function("conv", conv_args, t));
    conv_args.push_back(t);  // a conv with a bias is an operator of its own
    f_.emplace("convb", c.function("convb", conv_args, t));
  }

  const z3::sort& tensor() const { return tensor_; }

  // Leaf `name`: its entry in `leaves`, or a fresh constant (a candidate's leaf) added there.
  z3::expr leaf(const std::string& name, std::map<std::string, z3::expr>& leaves) {
    auto it = leaves.find(name);
    if (it == leaves.end()) it = leaves.emplace(name, c_.constant(name.c_str(), tensor_)).first;
    return it->second;
  }

  // `t` with its leaves looked up in `leaves` (a split point of -1 is the extent of its leaf).
  z3::expr encode(const TermRef& t, std::map<std::string, z3::expr>& leaves) {
    if (t->op == "leaf") return leaf(t->name, leaves);
    std::vector<z3::expr> a;
    for (const TermRef& arg : t->args) a.push_back(encode(arg, leaves));
    const std::string& op = t->op;
    const z3::func_decl& f = f_.at(op);
    if (op == "concat") return f(c_.int_val(t->axis), a[0], a[1]);
    if (op == "split0" || op == "split1") {
      const int64_t leaf_axis = t->split_leaf_axis < 0 ? t->axis : t->split_leaf_axis;
      const z3::expr at = t->split_at >= 0 ? c_.int_val(t->split_at)
                                            : f_.at("extent")(c_.int_val(leaf_axis), leaf(t->split_leaf, leaves));
      return f(c_.int_val(t->axis), at, a[0]);
    }
    if (op == "enlarge") return f(c_.int_val(t->from), a[0]);
    if (op == "conv") {
      z3::expr_vector args(c_);
      args.push_back(c_.int_val(t->same ? 1 : 0));
      args.push_back(c_.int_val(t->relu ? 1 : 0));
      args.push_back(c_.int_val(t->group));
      args.push_back(c_.int_val(t->stride));
      for (const z3::expr& arg : a) args.push_back(arg);
      return a.size() == 3 ? f_.at("convb")(args) : f(args);
    }
    if (a.size() == 1) return f(a[0]);
    return f(a[0], a[1]);
  }

  // Facts about extents that split points need (what ONNX's shape inference says of these ops):
  // a conv has as many output channels as its kernel has filters, a matmul as many columns as its
  // right operand, a bias add as many as its matrix, and enlarging a kernel keeps its filter count.
  std::vector<z3::expr> extent_facts() {
    const z3::expr x = c_.constant("e_x", tensor_), w = c_.constant("e_w", tensor_), b = c_.constant("e_b", tensor_);
    const z3::expr p = c_.int_const("e_p"), q = c_.int_const("e_q"), g = c_.int_const("e_g"), st = c_.int_const("e_s");
    const z3::func_decl& extent = f_.at("extent");
    z3::expr_vector conv_args(c_);
    for (const z3::expr& e : {p, q, g, st, x, w}) conv_args.push_back(e);
    z3::expr_vector all(c_), two(c_), enl(c_), biased(c_), biased_args(c_);
    for (const z3::expr& e : {p, q, g, st, x, w}) all.push_back(e);
    for (const z3::expr& e : {p, q, g, st, x, w, b}) {
      biased.push_back(e);
      biased_args.push_back(e);
    }
    two.push_back(x);
    two.push_back(w);
    enl.push_back(p);
    enl.push_back(w);
    return {z3::forall(all, extent(c_.int_val(1), f_.at("conv")(conv_args)) == extent(c_.int_val(0), w)),
            z3::forall(biased, extent(c_.int_val(1), f_.at("convb")(biased_args)) == extent(c_.int_val(0), w)),
            z3::forall(two, extent(c_.int_val(1), f_.at("matmul")(x, w)) == extent(c_.int_val(1), w)),
            z3::forall(two, extent(c_.int_val(1), f_.at("biasadd")(x, w)) == extent(c_.int_val(1), x)),
            z3::forall(enl, extent(c_.int_val(0), f_.at("enlarge")(p, w)) == extent(c_.int_val(0), w))};
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
  for (const z3::expr& fact : e.extent_facts()) s.add(fact);
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
