#include "scheduler/sketch/vector_axis.h"

#include <algorithm>

#include "scheduler/state/step.h"
#include "scheduler/state/steps/reorder_step.h"

namespace kiln::sketch {

using namespace state;

std::vector<VectorAxisChoice> vector_axis_choices(const State& s) {
  std::vector<VectorAxisChoice> out;
  State cur(s.dag_ptr());
  for (size_t i = 0; i < s.steps().size(); ++i) {
    const StepRef& step = s.steps()[i];
    if (auto* re = dynamic_cast<const ReorderStep*>(step.get())) {
      const Stage& st = cur.stage(re->stage_id);
      const std::vector<int>& order = re->after_ids;
      int last_reduce = -1;
      for (int k = 0; k < static_cast<int>(order.size()); ++k)
        if (st.node_of(order[static_cast<size_t>(k)]).kind != IteratorKind::Spatial) last_reduce = k;
      if (last_reduce >= 0) {
        VectorAxisChoice c;
        c.step = i;
        c.outer.assign(order.begin(), order.begin() + last_reduce + 1);
        for (size_t k = static_cast<size_t>(last_reduce) + 1; k < order.size(); ++k)
          c.innermost.emplace_back(st.iters[static_cast<size_t>(order[k])].node, order[k]);
        int current = -1;  // the innermost loop longer than 1: the vector now
        for (const auto& [node, pos] : c.innermost)
          if (st.nodes[static_cast<size_t>(node)].extent > 1) current = node;
        std::sort(c.innermost.begin(), c.innermost.end());
        for (const auto& [node, pos] : c.innermost)
          if (node != current && st.nodes[static_cast<size_t>(node)].extent > 1) c.others.push_back(node);
        if (!c.others.empty()) out.push_back(std::move(c));
      }
    }
    cur.apply(step);
  }
  return out;
}

std::optional<State> with_vector_axis(const State& s, const VectorAxisChoice& c, int node) {
  std::vector<int> order = c.outer;
  int last = -1;
  for (const auto& [n, pos] : c.innermost) {
    if (n == node) last = pos;
    else order.push_back(pos);
  }
  if (last < 0) return std::nullopt;
  order.push_back(last);
  std::vector<StepRef> steps = s.steps();
  steps[c.step] = std::make_shared<ReorderStep>(steps[c.step]->stage_id, std::move(order));
  try {
    return replay(s.dag_ptr(), steps);
  } catch (const ScheduleError&) {
    return std::nullopt;
  }
}

}  // namespace kiln::sketch
