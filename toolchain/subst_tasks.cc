#include "toolchain/subst_tasks.h"

#include <map>
#include <optional>

#include "frontend/passes/infer_shapes.h"
#include "frontend/passes/remove_dead_nodes.h"
#include "frontend/subst/optimizer.h"
#include "toolchain/pipeline.h"

namespace kiln {

namespace {

// Adds tasks to `out` once per key, at the most occurrences any one graph gave a key.
class TaskUnion {
 public:
  void add(std::vector<Task> tasks) {
    for (Task& t : tasks) {
      auto [it, fresh] = index_.emplace(t.key, out_.size());
      if (fresh) out_.push_back(std::move(t));
      else out_[it->second].weight = std::max(out_[it->second].weight, t.weight);
    }
  }
  std::vector<Task> take() { return std::move(out_); }

 private:
  std::vector<Task> out_;
  std::map<std::string, size_t> index_;
};

// The tasks of the graph after the search ranked by `costs` (the roofline when unset) and after each
// shorter prefix of its log, the empty one (no substitution) included.
void add_search_steps(const Graph& model, LayoutTarget target, const std::function<double(const Graph&)>& costs,
                      TaskUnion& tasks) {
  std::optional<Graph> searched;
  std::vector<subst::Rewrite> log;
  PipelineOptions o;
  o.substitutions = true;
  o.subst_costs = costs;
  o.on_subst = [&](const Graph& g, const subst::SearchResult& found) {
    searched = g;
    log = found.log;
  };
  tasks.add(laid_out_tasks(optimize_graph(model, target, o)));  // after the whole log
  for (size_t steps = 0; searched && steps < log.size(); ++steps) {
    Graph g = subst::replay_rewrites(*searched, subst::default_rules(),
                                     std::vector<subst::Rewrite>(log.begin(), log.begin() + static_cast<std::ptrdiff_t>(steps)));
    infer_shapes(g);  // the new weights folded, as the search's result is
    remove_dead_nodes(g);
    lay_out_model(g, target);
    tasks.add(laid_out_tasks(g));
  }
}

}  // namespace

std::vector<Task> subst_variant_tasks(const Graph& model, LayoutTarget target,
                                      const std::function<double(const Graph&)>& record_costs) {
  TaskUnion tasks;
  add_search_steps(model, target, {}, tasks);
  if (record_costs) add_search_steps(model, target, record_costs, tasks);
  return tasks.take();
}

}  // namespace kiln
