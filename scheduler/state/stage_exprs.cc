#include "scheduler/state/stage_exprs.h"

#include <set>

#include "scheduler/te/substitute.h"

namespace kiln::state {

Inliner::Inliner(const State& s) : s_(s) {
  for (size_t i = 0; i < s.stages().size(); ++i) stage_of_[s.stages()[i].tensor.get()] = static_cast<int>(i);
}

te::Expr Inliner::expand(const te::Expr& e) {
  return te::rewrite_loads(e, [&](const te::Expr& load) -> te::Expr {
    auto it = stage_of_.find(load->tensor.get());
    if (it == stage_of_.end()) return nullptr;
    const Stage& st = s_.stages()[static_cast<size_t>(it->second)];
    if (st.compute_at != ComputeAtKind::Inlined) return nullptr;
    auto cached = expanded_body_.find(it->second);
    if (cached == expanded_body_.end()) cached = expanded_body_.emplace(it->second, expand(st.op->body)).first;
    std::map<const te::ExprNode*, te::Expr> m;
    for (size_t k = 0; k < st.op->axes.size(); ++k) m[st.op->axes[k].get()] = load->args[k];
    return te::substitute(cached->second, m);
  });
}

std::vector<te::Expr> node_values(const Stage& st, const std::vector<te::Expr>& node_vars) {
  std::vector<te::Expr> v(st.nodes.size());
  for (const Iterator& it : st.iters) v[static_cast<size_t>(it.node)] = node_vars[static_cast<size_t>(it.node)];
  auto extent = [&](int n) { return st.nodes[static_cast<size_t>(n)].extent; };
  for (size_t ri = st.relations.size(); ri-- > 0;) {
    const IterRelation& r = st.relations[ri];
    if (r.kind == IterRelation::Split) {
      te::Expr acc;
      for (int o : r.out) {
        const te::Expr& x = v[static_cast<size_t>(o)];
        if (!x) throw ScheduleError("stage '" + st.name() + "': loop '" + st.nodes[static_cast<size_t>(o)].name + "' has no value");
        acc = acc ? acc * extent(o) + x : x;
      }
      v[static_cast<size_t>(r.in[0])] = acc;
      continue;
    }
    const te::Expr& fused = v[static_cast<size_t>(r.out[0])];
    if (!fused) throw ScheduleError("stage '" + st.name() + "': fused loop has no value");
    int64_t stride = 1;
    for (size_t k = r.in.size(); k-- > 0;) {
      te::Expr q = stride == 1 ? fused : te::floordiv(fused, te::int_imm(stride));
      // The outermost input is not wrapped: past the end it stays past the end, where guards catch it.
      v[static_cast<size_t>(r.in[k])] = k == 0 ? q : te::floormod(q, te::int_imm(extent(r.in[k])));
      stride *= extent(r.in[k]);
    }
  }
  return v;
}

std::vector<std::vector<te::Expr>> make_node_vars(const State& s) {
  std::vector<std::vector<te::Expr>> vars;
  for (const Stage& st : s.stages()) {
    std::vector<te::Expr> sv;
    for (const IterNode& n : st.nodes) sv.push_back(te::var(st.name() + "." + n.name));
    vars.push_back(std::move(sv));
  }
  return vars;
}

std::vector<int> consumers_through_inlined(const State& s, int stage) {
  std::set<int> out;
  std::vector<const te::TensorNode*> frontier{s.stages()[static_cast<size_t>(stage)].tensor.get()};
  std::set<const te::TensorNode*> seen;
  while (!frontier.empty()) {
    const te::TensorNode* t = frontier.back();
    frontier.pop_back();
    if (!seen.insert(t).second) continue;
    for (size_t i = 0; i < s.stages().size(); ++i) {
      const Stage& c = s.stages()[i];
      if (!c.op) continue;
      bool reads = false;
      if (c.op->is_extern()) {
        for (const te::TensorRef& in : c.op->extern_inputs) reads = reads || in.get() == t;
      } else {
        auto check = [&](const te::Expr& l) { reads = reads || l->tensor.get() == t; };
        te::visit_loads(c.op->body, check);
        te::visit_loads(c.op->init, check);
      }
      if (!reads) continue;
      if (c.compute_at == ComputeAtKind::Inlined) frontier.push_back(c.tensor.get());
      else out.insert(static_cast<int>(i));
    }
  }
  return {out.begin(), out.end()};
}

}  // namespace kiln::state
