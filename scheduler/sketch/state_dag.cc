#include "scheduler/sketch/state_dag.h"

#include "scheduler/te/substitute.h"

namespace kiln::sketch {

StateDag make_state_dag(const state::State& s) {
  StateDag d;
  std::map<const te::TensorNode*, te::TensorRef> renamed;  // identity tensor -> analysed tensor
  for (size_t i = 0; i < s.stages().size(); ++i) {
    const state::Stage& st = s.stages()[i];
    te::TensorRef t;
    if (st.kind == state::StageKind::Placeholder) {
      t = st.tensor;
    } else {
      auto op = std::make_shared<te::Stage>(*st.op);
      auto redirect = [&](const te::Expr& l) -> te::Expr {
        auto it = renamed.find(l->tensor.get());
        return it == renamed.end() ? nullptr : te::load(it->second, l->args);
      };
      op->body = te::rewrite_loads(op->body, redirect);
      op->init = te::rewrite_loads(op->init, redirect);
      for (te::TensorRef& in : op->extern_inputs)
        if (in && renamed.count(in.get())) in = renamed[in.get()];
      auto node = std::make_shared<te::TensorNode>();
      node->name = st.name();
      node->dtype = st.tensor->dtype;
      node->shape = st.tensor->shape;
      node->stage = op;
      t = node;
    }
    renamed[st.tensor.get()] = t;
    d.tensor_of_stage.push_back(t);
    d.stage_of[t.get()] = static_cast<int>(i);
  }
  std::vector<te::TensorRef> outputs;
  for (const te::TensorRef& o : s.dag().outputs) outputs.push_back(renamed.at(o.get()));
  d.dag = te::make_dag(outputs);
  d.analysis = std::make_shared<te::DagAnalysis>(d.dag);
  return d;
}

namespace {

std::vector<int> ids(const StateDag& d, const std::vector<te::TensorRef>& ts) {
  std::vector<int> out;
  for (const te::TensorRef& t : ts) out.push_back(d.stage_of.at(t.get()));
  return out;
}

}  // namespace

std::vector<int> StateDag::consumers(const state::State& s, int stage) const {
  auto inlined = [&](const te::TensorNode* t) { return s.stage(stage_of.at(t)).compute_at == state::ComputeAtKind::Inlined; };
  return ids(*this, analysis->consumers(tensor(stage), inlined));
}

std::vector<int> StateDag::producers(const state::State& s, int stage) const {
  auto inlined = [&](const te::TensorNode* t) { return s.stage(stage_of.at(t)).compute_at == state::ComputeAtKind::Inlined; };
  return ids(*this, analysis->producers(tensor(stage), inlined));
}

}  // namespace kiln::sketch
