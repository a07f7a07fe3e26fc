#include "scheduler/state/state.h"

#include <fmt/format.h>

#include <map>

#include "scheduler/state/infer_bound.h"
#include "scheduler/state/stage_exprs.h"
#include "scheduler/state/step.h"
#include "scheduler/state/steps/compute_location_steps.h"

namespace kiln::state {

const char* iterator_kind_name(IteratorKind k) {
  switch (k) {
    case IteratorKind::Spatial: return "spatial";
    case IteratorKind::Reduction: return "reduction";
    case IteratorKind::Mixed: return "mixed";
    case IteratorKind::Special: return "special";
  }
  return "?";
}

const char* annotation_name(IteratorAnnotation a) {
  switch (a) {
    case IteratorAnnotation::None: return "for";
    case IteratorAnnotation::Unroll: return "unroll";
    case IteratorAnnotation::Vectorize: return "vectorize";
    case IteratorAnnotation::Parallel: return "parallel";
    case IteratorAnnotation::VThread: return "vthread";
    case IteratorAnnotation::BlockX: return "blockIdx.x";
    case IteratorAnnotation::ThreadX: return "threadIdx.x";
    case IteratorAnnotation::BlockY: return "blockIdx.y";
    case IteratorAnnotation::ThreadY: return "threadIdx.y";
    case IteratorAnnotation::BlockZ: return "blockIdx.z";
    case IteratorAnnotation::ThreadZ: return "threadIdx.z";
    case IteratorAnnotation::Tensorize: return "tensorize";
  }
  return "?";
}

int Stage::iter_of_node(int node) const {
  for (size_t i = 0; i < iters.size(); ++i)
    if (iters[i].node == node) return static_cast<int>(i);
  return -1;
}

Stage make_stage(te::TensorRef tensor, std::shared_ptr<const te::Stage> op) {
  Stage st;
  st.tensor = std::move(tensor);
  st.op = std::move(op);
  if (!st.op) {
    st.kind = StageKind::Placeholder;
    return st;
  }
  if (st.op->is_extern()) {
    st.kind = StageKind::Extern;
    return st;
  }
  for (size_t k = 0; k < st.op->axes.size(); ++k)
    st.nodes.push_back({st.op->axes[k]->name, IteratorKind::Spatial, st.op->shape[k]});
  for (const te::IterVar& r : st.op->reduce_axes)
    st.nodes.push_back({r.var->name, IteratorKind::Reduction, r.extent});
  st.num_roots = static_cast<int>(st.nodes.size());
  for (int i = 0; i < st.num_roots; ++i) {
    st.iters.push_back({i, IteratorAnnotation::None, 0});
    st.root_domain.push_back(st.nodes[static_cast<size_t>(i)].extent);
  }
  return st;
}

State::State(std::shared_ptr<const te::ComputeDAG> dag) : data_(std::make_shared<StateData>()) {
  data_->dag = std::move(dag);
  for (const te::TensorRef& p : data_->dag->placeholders) data_->stages.push_back(make_stage(p, nullptr));
  for (const te::TensorRef& t : data_->dag->tensors) data_->stages.push_back(make_stage(t, t->stage));
}

const Stage& State::stage(int id) const {
  if (id < 0 || static_cast<size_t>(id) >= data_->stages.size())
    throw ScheduleError(fmt::format("stage {} does not exist (the state has {} stages)", id, data_->stages.size()));
  return data_->stages[static_cast<size_t>(id)];
}

StateData& State::mut() {
  if (data_.use_count() > 1) data_ = std::make_shared<StateData>(*data_);
  return *data_;
}

Stage& State::mutable_stage(int id) {
  stage(id);  // range check
  return mut().stages[static_cast<size_t>(id)];
}

std::vector<Stage>& State::mutable_stages() { return mut().stages; }

void State::apply(const StepRef& step) {
  State next = *this;
  step->apply_to(next);
  // A stage computed inside another must stay readable only there, whatever the step changed.
  for (size_t i = 0; i < next.stages().size(); ++i) {
    const Stage& st = next.stages()[i];
    if (st.compute_at != ComputeAtKind::Iter) continue;
    const Stage& target = next.stage(st.attach_stage);
    const int pos = target.iter_of_node(st.attach_node);
    if (target.compute_at == ComputeAtKind::Inlined || pos < 0)
      throw ScheduleError("stage '" + st.name() + "' is computed inside a loop '" + target.name() + "' no longer has");
    // Its one reader is the target, or is computed in the target inside that loop (ComputeAtStep).
    if (compute_at_consumer(next, static_cast<int>(i), st.attach_stage, pos) < 0)
      throw ScheduleError("stage '" + st.name() + "' is computed inside '" + target.name() + "' but read elsewhere");
  }
  next.mut().steps.push_back(step);
  *this = std::move(next);
}

int State::stage_id(const std::string& name) const {
  for (size_t i = 0; i < data_->stages.size(); ++i)
    if (data_->stages[i].name() == name) return static_cast<int>(i);
  return -1;
}

bool State::has_undefined_lengths() const {
  for (const Stage& st : data_->stages)
    for (const IterRelation& r : st.relations)
      for (const auto& l : r.lengths)
        if (!l) return true;
  return false;
}

void State::insert_stage(int pos, Stage s) {
  auto& stages = mut().stages;
  for (Stage& st : stages)
    if (st.attach_stage >= pos) ++st.attach_stage;
  if (s.attach_stage >= pos) ++s.attach_stage;
  stages.insert(stages.begin() + pos, std::move(s));
}

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Extents of a split's outputs from the parent's extent: the part without a length takes the rest.
void split_extents(const Stage& st, const IterRelation& r, std::vector<IterNode>& nodes) {
  const int64_t parent = nodes[static_cast<size_t>(r.in[0])].extent;
  int64_t product = 1;
  bool known = parent >= 0;
  for (const auto& l : r.lengths) {
    if (l) product *= *l;
    else known = false;
  }
  const size_t n = r.out.size();
  for (size_t k = 0; k < r.lengths.size(); ++k) {
    size_t o = r.inner_to_outer ? k + 1 : k;
    nodes[static_cast<size_t>(r.out[o])].extent = r.lengths[k] ? *r.lengths[k] : -1;
  }
  size_t rest = r.inner_to_outer ? 0 : n - 1;
  nodes[static_cast<size_t>(r.out[rest])].extent = known ? ceil_div(parent, product) : -1;
  (void)st;
}

}  // namespace

void State::propagate_extents() {
  for (Stage& st : mut().stages) state::propagate_extents(st);
}

void propagate_extents(Stage& st) {
  {
    for (const IterRelation& r : st.relations) {
      if (r.kind == IterRelation::Split) {
        split_extents(st, r, st.nodes);
        continue;
      }
      int64_t e = 1;
      for (int i : r.in) {
        int64_t x = st.nodes[static_cast<size_t>(i)].extent;
        e = (e < 0 || x < 0) ? -1 : e * x;
      }
      st.nodes[static_cast<size_t>(r.out[0])].extent = e;
    }
  }
}

State replay(std::shared_ptr<const te::ComputeDAG> dag, const std::vector<StepRef>& steps) {
  State s(std::move(dag));
  for (size_t i = 0; i < steps.size(); ++i) {
    try {
      s.apply(steps[i]);
    } catch (const ScheduleError& e) {
      throw ScheduleError(fmt::format("step {} ({}): {}", i, steps[i]->prefix(), e.what()));
    }
  }
  return s;
}

namespace {

std::string extent_text(int64_t e) { return e < 0 ? "?" : std::to_string(e); }

struct Printer {
  const State& s;
  const std::vector<Stage>& stages;  // after bound inference
  std::string out;

  void line(int depth, const std::string& text) { out += std::string(static_cast<size_t>(2 * depth), ' ') + text + "\n"; }

  void attached_at(int stage, int node, int depth) {
    for (size_t i = 0; i < stages.size(); ++i)
      if (stages[i].compute_at == ComputeAtKind::Iter && stages[i].attach_stage == stage && stages[i].attach_node == node)
        stage_nest(static_cast<int>(i), depth);
  }

  void stage_nest(int id, int depth) {
    const Stage& st = stages[static_cast<size_t>(id)];
    if (st.kind == StageKind::Extern) {
      line(depth, st.name() + " = extern " + st.op->extern_node->op_type + "(...)");
      return;
    }
    for (size_t i = 0; i < st.iters.size(); ++i) {
      const Iterator& it = st.iters[i];
      const IterNode& n = st.nodes[static_cast<size_t>(it.node)];
      std::string pragma = it.auto_unroll_max_step ? fmt::format(" [auto_unroll_max_step={}]", it.auto_unroll_max_step) : "";
      line(depth, fmt::format("{} {} (0,{}){}", annotation_name(it.annotation), n.name, extent_text(n.extent), pragma));
      ++depth;
      attached_at(id, it.node, depth);
    }
    std::string lhs = st.name();
    if (st.scope != "global") lhs += " (" + st.scope + ")";
    line(depth, lhs + (st.op->reducer == te::Reducer::None ? " = ..." : fmt::format(" {}= ...", te::reducer_name(st.op->reducer))));
  }
};

}  // namespace

std::string print_state(const State& s) {
  std::vector<Stage> stages = infer_bound(s);
  Printer p{s, stages, {}};
  std::string placeholders;
  for (const Stage& st : stages)
    if (st.kind == StageKind::Placeholder)
      placeholders += (placeholders.empty() ? "" : ", ") + st.name() + (st.layout_rewrite ? " (layout rewritten)" : "");
  if (!placeholders.empty()) p.out += "Placeholder: " + placeholders + "\n";
  for (size_t i = 0; i < stages.size(); ++i) {
    const Stage& st = stages[i];
    if (st.kind == StageKind::Placeholder || st.compute_at != ComputeAtKind::Root) continue;
    p.stage_nest(static_cast<int>(i), 0);
  }
  return p.out;
}

std::string print_steps(const State& s) {
  State replayed(s.dag_ptr());
  std::string out;
  for (const StepRef& st : s.steps()) {
    out += st->print(replayed) + "\n";
    replayed.apply(st);
  }
  return out;
}

}  // namespace kiln::state
