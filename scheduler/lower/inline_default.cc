#include "scheduler/lower/inline_default.h"

#include <optional>
#include <set>

#include "scheduler/te/substitute.h"

namespace kiln::lower {
namespace {

// How many loads of `t` the body (and a reduction's start value) of `s` has.
int loads_of(const te::Stage& s, const te::TensorNode* t) {
  int n = 0;
  auto count = [&](const te::Expr& load) { n += load->tensor.get() == t; };
  if (s.body) te::visit_loads(s.body, count);
  if (s.init) te::visit_loads(s.init, count);
  return n;
}

// Whether `e` selects between values (a Concat, a Pad, Where): such a stage keeps its loop nest,
// which the default schedule splits at the select's bounds (lower_dag's select chains); inside
// another stage's index arithmetic that split is lost and every element would test every bound.
bool selects(const te::Expr& e) {
  if (!e) return false;
  if (e->op == te::ExprOp::Select) return true;
  for (const te::Expr& a : e->args)
    if (selects(a)) return true;
  return false;
}

// Whether `load`, in a stage with axes `axes`, walks its tensor's last dimension along the stage's
// last axis, one element per step, and no other dimension along it: the access the default
// schedule's vector loop reads contiguously. A Transpose's loads do not (its stage is lowered as
// tiles through a local buffer), nor a Reshape's (a flat position taken apart by div and mod).
bool in_order(const te::Expr& load, const std::vector<te::Expr>& axes) {
  if (axes.empty() || load->args.empty()) return true;
  const te::ExprNode* last = axes.back().get();
  for (size_t k = 0; k + 1 < load->args.size(); ++k)
    if (te::mentions(load->args[k], last)) return false;
  const std::optional<int64_t> step = te::linear_coeff(load->args.back().get(), last);
  return step && (*step == 1 || (*step == 0 && load->tensor->shape.back() == 1));
}

// Whether the largest tensor `s` reads (DequantizeLinear's data, not its scale) has narrower
// elements than it writes.
bool widens(const te::Stage& s) {
  te::TensorRef largest;
  for (const te::TensorRef& in : s.inputs())
    if (!largest || num_elements(in->shape) > num_elements(largest->shape)) largest = in;
  return largest && dtype_size(largest->dtype) < dtype_size(s.dtype);
}

bool reads_in_order(const te::Stage& s, const te::TensorNode* only = nullptr) {
  bool ok = true;
  auto check = [&](const te::Expr& load) {
    if (!only || load->tensor.get() == only) ok = ok && in_order(load, s.axes);
  };
  if (s.body) te::visit_loads(s.body, check);
  return ok;
}

// Whether reduction `r` reads each element of `t` once: its one load of t indexes every dimension by
// a distinct axis or reduction variable of its own (GlobalAveragePool's x[n, c, rh, rw]), and its
// outputs times its reduction steps are as many as t's elements. Inlined there, t is computed once
// per element, as its own loop nest would.
bool reduction_reads_each_once(const te::Stage& r, const te::TensorRef& t) {
  std::set<const te::ExprNode*> vars, used;
  for (const te::Expr& a : r.axes) vars.insert(a.get());
  int64_t steps = num_elements(r.shape);
  for (const te::IterVar& v : r.reduce_axes) {
    vars.insert(v.var.get());
    steps *= v.extent;
  }
  bool ok = steps == num_elements(t->shape);
  te::visit_loads(r.body, [&](const te::Expr& load) {
    if (load->tensor.get() != t.get()) return;
    for (const te::Expr& index : load->args)
      ok = ok && vars.count(index.get()) && used.insert(index.get()).second;
  });
  return ok;
}

}  // namespace

LoweredSubgraph inline_into_readers(const LoweredSubgraph& sg, std::map<const te::TensorNode*, te::TensorRef>& rebuilt) {
  const te::ComputeDAG& dag = sg.dag;
  std::set<const te::TensorNode*> outputs;
  for (const te::TensorRef& o : dag.outputs) outputs.insert(o.get());
  std::map<const te::TensorNode*, std::vector<const te::Stage*>> readers;
  for (const te::TensorRef& t : dag.tensors)
    for (const te::TensorRef& in : t->stage->inputs()) {
      auto& r = readers[in.get()];
      if (r.empty() || r.back() != t->stage.get()) r.push_back(t->stage.get());
    }
  auto qualifies = [&](const te::TensorRef& t) {
    const te::Stage& s = *t->stage;
    if (outputs.count(t.get()) || s.is_extern() || s.is_reduction() || s.tag == "pad" || selects(s.body)) return false;
    const auto& r = readers[t.get()];
    if (r.size() != 1 || r[0]->is_extern() || loads_of(*r[0], t.get()) != 1 || !reads_in_order(s)) return false;
    // Into a reduction only a widening stage (a DequantizeLinear), which its own buffer would store
    // wider than what it reads (frontend/partition: such a stage goes with the reduction after it).
    if (r[0]->is_reduction())
      return widens(s) && reduction_reads_each_once(*r[0], t);
    return num_elements(r[0]->shape) == num_elements(t->shape) && reads_in_order(*r[0], t.get());
  };

  std::map<const te::TensorNode*, const te::Stage*> inlined;  // old tensor -> its stage, bodies rewritten
  std::vector<std::shared_ptr<te::Stage>> kept_alive;
  auto rewrite = [&](const te::Expr& e) -> te::Expr {
    if (!e) return e;
    return te::rewrite_loads(e, [&](const te::Expr& load) -> te::Expr {
      const te::TensorNode* t = load->tensor.get();
      if (auto in = inlined.find(t); in != inlined.end()) {
        std::map<const te::ExprNode*, te::Expr> at;
        for (size_t k = 0; k < in->second->axes.size(); ++k) at[in->second->axes[k].get()] = load->args[k];
        return te::substitute(in->second->body, at);
      }
      if (auto r = rebuilt.find(t); r != rebuilt.end()) return te::load(r->second, load->args);
      return nullptr;
    });
  };
  for (const te::TensorRef& t : dag.tensors) {
    auto stage = std::make_shared<te::Stage>(*t->stage);
    stage->body = rewrite(stage->body);
    stage->init = rewrite(stage->init);
    bool changed = stage->body != t->stage->body || stage->init != t->stage->init;
    for (te::TensorRef& in : stage->extern_inputs)
      if (auto r = rebuilt.find(in.get()); r != rebuilt.end()) {
        in = r->second;
        changed = true;
      }
    if (qualifies(t)) {
      inlined[t.get()] = stage.get();
      kept_alive.push_back(stage);
      continue;
    }
    if (!changed) continue;
    auto node = std::make_shared<te::TensorNode>(*t);
    node->stage = stage;
    rebuilt[t.get()] = node;
  }
  LoweredSubgraph out;
  out.inputs = sg.inputs;
  for (const te::TensorRef& o : sg.outputs) {
    auto r = rebuilt.find(o.get());
    out.outputs.push_back(r == rebuilt.end() ? o : r->second);
  }
  std::vector<te::TensorRef> dag_outputs;
  for (const te::TensorRef& o : dag.outputs) {
    auto r = rebuilt.find(o.get());
    dag_outputs.push_back(r == rebuilt.end() ? o : r->second);
  }
  out.dag = te::make_dag(dag_outputs);
  return out;
}

}  // namespace kiln::lower
