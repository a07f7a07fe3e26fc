#include "scheduler/te/analysis.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <climits>
#include <functional>
#include <set>
#include <unordered_set>

#include "frontend/ir/error.h"
#include "scheduler/tasks/dag_flops.h"

namespace kiln::te {

namespace {

// Ops that generated code evaluates as a polynomial or series (see the \file for why only these).
bool is_expensive(ExprOp op) {
  switch (op) {
    case ExprOp::Exp: case ExprOp::Log: case ExprOp::Tanh: case ExprOp::Erf: case ExprOp::Sigmoid:
    case ExprOp::Sin: case ExprOp::Cos: case ExprOp::Tan: case ExprOp::Asin: case ExprOp::Acos:
    case ExprOp::Atan: case ExprOp::Sinh: case ExprOp::Cosh: case ExprOp::Asinh: case ExprOp::Acosh:
    case ExprOp::Atanh: case ExprOp::Pow:
      return true;
    default:
      return false;
  }
}

bool has_expensive_op(const Expr& e) {
  if (!e) return false;
  if (is_expensive(e->op)) return true;
  return std::any_of(e->args.begin(), e->args.end(), has_expensive_op);
}

// Every Load in e, outer loads before the loads inside their indices (a gather's index tensor).
void collect_loads(const Expr& e, std::vector<const ExprNode*>& out) {
  if (!e) return;
  if (e->op == ExprOp::Load) out.push_back(e.get());
  for (const Expr& a : e->args) collect_loads(a, out);
}

// Loop variables are compared by node identity: compute() hands each stage its own axis nodes,
// and every name ("i0") repeats across stages.
void collect_vars(const Expr& e, std::unordered_set<const ExprNode*>& out) {
  if (!e) return;
  if (e->op == ExprOp::Var) out.insert(e.get());
  for (const Expr& a : e->args) collect_vars(a, out);
}

bool is_axis(const Stage& s, const Expr& index) {
  return index->op == ExprOp::Var &&
         std::any_of(s.axes.begin(), s.axes.end(), [&](const Expr& a) { return a.get() == index.get(); });
}

// A read at exactly the reader's own axes, in order: reader[i...] uses producer[i...].
bool is_identity_read(const Stage& reader, const std::vector<Expr>& indices) {
  if (indices.size() != reader.axes.size()) return false;
  for (size_t k = 0; k < indices.size(); ++k)
    if (indices[k].get() != reader.axes[k].get()) return false;
  return true;
}

}  // namespace

DagAnalysis::DagAnalysis(const ComputeDAG& dag) {
  auto add = [&](const TensorRef& t) {
    if (!t || position_.count(t.get())) return;
    position_[t.get()] = order_.size();
    order_.push_back(Facts{});
    order_.back().tensor = t;
  };
  for (const TensorRef& p : dag.placeholders) add(p);
  for (const TensorRef& t : dag.tensors) {
    if (!t->stage) throw Error(fmt::format("analysis: '{}' is listed as a stage but has none", t->name));
    add(t);
  }
  for (const TensorRef& o : dag.outputs) order_[position(o.get())].output = true;

  for (size_t me = 0; me < order_.size(); ++me) {
    Facts& f = order_[me];
    if (!f.tensor->stage) continue;
    const Stage& s = *f.tensor->stage;
    auto producer_of = [&](const TensorNode* t) {
      auto it = position_.find(t);
      if (it == position_.end())
        throw Error(fmt::format("analysis: stage '{}' reads '{}', which is not in the DAG", s.name, t->name));
      return it->second;
    };

    if (s.is_extern()) {
      for (const TensorRef& in : s.extern_inputs) f.reads[producer_of(in.get())];  // reads without indices
    } else {
      std::vector<const ExprNode*> loads;
      collect_loads(s.init, loads);
      collect_loads(s.body, loads);
      for (const ExprNode* l : loads) f.reads[producer_of(l->tensor.get())].push_back(l->args);
    }
    for (const auto& [p, _] : f.reads) f.producers.push_back(p);
    std::sort(f.producers.begin(), f.producers.end());
    for (size_t p : f.producers) order_[p].consumers.push_back(me);  // `me` ascends, so these stay sorted

    f.flops = stage_flops(s);
    if (s.is_extern()) continue;  // none of the access facts hold for a runtime kernel

    f.simple_access = true;
    for (const auto& [p, reads] : f.reads)
      for (const Indices& idx : reads)
        for (const Expr& i : idx)
          if (i->op != ExprOp::IntImm && !is_axis(s, i)) f.simple_access = false;
    f.inlineable = !s.is_reduction();
    f.strictly_inlineable = f.inlineable && f.simple_access && !has_expensive_op(s.body) && !has_expensive_op(s.init);

    // Ansor's count of operands with reuse along some output axis. One deviation: a tensor read only
    // at constant indices (a scalar weight such as GELU's 1/sqrt(2)) is one value in a register, so
    // it brings no reuse worth tiling for and is not counted.
    int missing = 0;
    for (const auto& [p, reads] : f.reads) {
      std::unordered_set<const ExprNode*> vars;
      for (const Indices& idx : reads)
        for (const Expr& i : idx) collect_vars(i, vars);
      if (vars.empty()) continue;
      for (size_t k = 0; k < s.axes.size(); ++k) {
        if (s.shape[k] > 1 && !vars.count(s.axes[k].get())) {
          ++missing;
          break;
        }
      }
    }
    f.multi_level_tiling = missing >= 2 || (missing == 1 && s.is_reduction());
  }

  // Needs every stage's reads, so after the pass above.
  for (size_t me = 0; me < order_.size(); ++me) {
    Facts& f = order_[me];
    if (!f.inlineable || !f.simple_access || f.output || f.consumers.size() != 1) continue;
    const Facts& reader = order_[f.consumers[0]];
    const Stage& r = *reader.tensor->stage;
    const std::vector<Indices>& reads = reader.reads.at(me);
    f.inlines_into_reader = !r.is_extern() && !r.is_reduction() && r.shape == f.tensor->shape && reads.size() == 1 &&
                            is_identity_read(r, reads[0]);
  }
}

size_t DagAnalysis::position(const TensorNode* t) const {
  auto it = position_.find(t);
  if (it == position_.end()) throw Error(fmt::format("analysis: tensor '{}' is not in the DAG", t ? t->name : "null"));
  return it->second;
}

std::vector<TensorRef> DagAnalysis::tensors_at(const std::vector<size_t>& positions) const {
  std::vector<TensorRef> out;
  for (size_t p : positions) out.push_back(order_[p].tensor);
  return out;
}

bool DagAnalysis::is_simple_access(const TensorNode* t) const { return order_[position(t)].simple_access; }
bool DagAnalysis::is_inlineable(const TensorNode* t) const { return order_[position(t)].inlineable; }
bool DagAnalysis::is_strictly_inlineable(const TensorNode* t) const {
  return order_[position(t)].strictly_inlineable;
}
bool DagAnalysis::inlines_into_its_reader(const TensorNode* t) const { return order_[position(t)].inlines_into_reader; }
bool DagAnalysis::should_always_inline(const TensorNode* t) const {
  const Facts& f = order_[position(t)];
  return (f.strictly_inlineable || f.inlines_into_reader) && !f.output;
}
bool DagAnalysis::needs_multi_level_tiling(const TensorNode* t) const {
  return order_[position(t)].multi_level_tiling;
}
bool DagAnalysis::is_output(const TensorNode* t) const { return order_[position(t)].output; }
double DagAnalysis::flops(const TensorNode* t) const { return order_[position(t)].flops; }

std::vector<TensorRef> DagAnalysis::direct_consumers(const TensorNode* t) const {
  return tensors_at(order_[position(t)].consumers);
}

std::vector<TensorRef> DagAnalysis::direct_producers(const TensorNode* t) const {
  return tensors_at(order_[position(t)].producers);
}

std::vector<TensorRef> DagAnalysis::consumers(const TensorNode* t, const InlinedFn& is_inlined) const {
  std::set<size_t> found, visited;
  std::function<void(size_t)> walk = [&](size_t from) {
    for (size_t c : order_[from].consumers) {
      if (is_inlined && is_inlined(order_[c].tensor.get())) {
        if (visited.insert(c).second) walk(c);
      } else {
        found.insert(c);
      }
    }
  };
  walk(position(t));
  return tensors_at({found.begin(), found.end()});
}

std::vector<TensorRef> DagAnalysis::producers(const TensorNode* t, const InlinedFn& is_inlined) const {
  std::set<size_t> found, visited;
  std::function<void(size_t)> walk = [&](size_t from) {
    for (size_t p : order_[from].producers) {
      const TensorRef& pt = order_[p].tensor;
      if (pt->stage && is_inlined && is_inlined(pt.get())) {
        if (visited.insert(p).second) walk(p);
      } else {
        found.insert(p);
      }
    }
  };
  walk(position(t));
  return tensors_at({found.begin(), found.end()});
}

int DagAnalysis::common_outer_of_edge(size_t producer, size_t reader) const {
  const Facts& r = order_[reader];
  const Stage& s = *r.tensor->stage;
  const Shape& produced = order_[producer].tensor->shape;
  auto it = r.reads.find(producer);
  if (s.is_extern() || it == r.reads.end() || it->second.empty()) return 0;
  int common = INT_MAX;
  for (const Indices& idx : it->second) {
    int n = 0;
    while (static_cast<size_t>(n) < idx.size() && static_cast<size_t>(n) < s.axes.size() &&
           idx[n].get() == s.axes[n].get() && produced[n] == s.shape[n])
      ++n;
    common = std::min(common, n);
  }
  return common;
}

int DagAnalysis::num_common_outer_iterators(const TensorNode* t, const TensorNode* target) const {
  const size_t from = position(t), to = position(target);
  if (from == to) return static_cast<int>(t->shape.size());
  // best[u]: the fewest loops shared on any path u -> target (INT_MAX at target, -1 if unreachable).
  // Stages only read earlier positions, so one backward sweep settles every u before its producers.
  std::vector<int> best(order_.size(), -1);
  best[to] = INT_MAX;
  for (size_t u = to; u-- > from;) {
    for (size_t c : order_[u].consumers) {
      if (c > to || best[c] < 0) continue;
      int via = std::min(common_outer_of_edge(u, c), best[c]);
      best[u] = best[u] < 0 ? via : std::min(best[u], via);
    }
  }
  return best[from] < 0 ? 0 : best[from];
}

bool DagAnalysis::elementwise_match(const TensorNode* t, const TensorNode* target) const {
  size_t cur = position(t);
  const size_t to = position(target);
  while (cur != to) {
    // The one stage that reads cur once stages that inline into their reader are looked through
    // (SiLU's sigmoid between a conv and its Mul); every read on the way must be elementwise.
    std::set<size_t> next;
    std::function<bool(size_t)> readers_of = [&](size_t from) {
      const Facts& f = order_[from];
      if (!f.tensor->stage || f.tensor->stage->is_extern() || f.consumers.empty()) return false;
      for (size_t c : f.consumers) {
        const Stage& reader = *order_[c].tensor->stage;
        if (reader.is_extern() || reader.is_reduction() || f.tensor->shape != reader.shape) return false;
        for (const Indices& idx : order_[c].reads.at(from))
          if (!is_identity_read(reader, idx)) return false;
        if (c != to && order_[c].inlines_into_reader) {
          if (!readers_of(c)) return false;
        } else {
          next.insert(c);
        }
      }
      return true;
    };
    if (!readers_of(cur) || next.size() != 1) return false;
    cur = *next.begin();
  }
  return true;
}

std::string print_analysis(const ComputeDAG& dag) {
  DagAnalysis a(dag);
  std::string out;
  auto print_one = [&](const TensorRef& t) {
    const TensorNode* n = t.get();
    std::vector<std::string> facts;
    if (!n->stage) facts.push_back("placeholder");
    if (a.is_output(n)) facts.push_back("output");
    if (a.is_simple_access(n)) facts.push_back("simple-access");
    if (a.is_inlineable(n)) facts.push_back("inlineable");
    if (a.is_strictly_inlineable(n)) facts.push_back("strictly-inlineable");
    if (a.inlines_into_its_reader(n)) facts.push_back("inlines-into-reader");
    if (a.needs_multi_level_tiling(n)) facts.push_back("multi-level-tiling");
    std::vector<std::string> producers, consumers;
    for (const TensorRef& p : a.direct_producers(n)) producers.push_back(p->name);
    for (const TensorRef& c : a.direct_consumers(n))
      consumers.push_back(fmt::format("{}(outer {}{})", c->name, a.num_common_outer_iterators(n, c.get()),
                                      a.elementwise_match(n, c.get()) ? ", ew" : ""));
    auto list = [](const std::vector<std::string>& v, const char* sep) {
      return v.empty() ? std::string("-") : fmt::format("{}", fmt::join(v, sep));
    };
    out += fmt::format("{}: {} | producers {} | consumers {} | flops {}\n", n->name, list(facts, " "),
                       list(producers, ", "), list(consumers, ", "), a.flops(n));
  };
  for (const TensorRef& p : dag.placeholders) print_one(p);
  for (const TensorRef& t : dag.tensors) print_one(t);
  return out;
}

std::vector<TensorRef> reduction_weights(const ComputeDAG& dag, const std::string& except_tag) {
  std::vector<TensorRef> out;
  for (const TensorRef& t : dag.tensors)
    if (t->stage && !t->stage->is_extern() && !t->stage->reduce_axes.empty() && (except_tag.empty() || t->stage->tag != except_tag))
      for (const TensorRef& in : t->stage->inputs())
        if (in->constant && std::find(out.begin(), out.end(), in) == out.end()) out.push_back(in);
  return out;
}

}  // namespace kiln::te
