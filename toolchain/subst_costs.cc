#include "toolchain/subst_costs.h"

#include <map>
#include <memory>

#include "frontend/passes/infer_shapes.h"
#include "frontend/passes/remove_dead_nodes.h"
#include "toolchain/pipeline.h"

namespace kiln {

std::function<double(const Graph&)> record_graph_costs(const std::vector<measure::Record>& records, const std::string& target,
                                                       LayoutTarget layout) {
  const subst::Roofline fallback = subst::roofline_for(layout.vector_bits, 1);
  auto latency = std::make_shared<std::map<std::string, double>>();  // by task key, for this target
  for (const auto& [key, best] : measure::best_records(records))
    if (key.second == target) (*latency)[key.first] = measure::mean_cost(best);
  return [latency, layout, fallback](const Graph& candidate) {
    Graph g = candidate;
    infer_shapes(g);  // the search leaves new weights (a concat of two kernels) unfolded
    remove_dead_nodes(g);
    lay_out(g, layout);
    double known_seconds = 0, known_flops = 0, unknown_flops = 0;
    for (const Task& t : laid_out_tasks(g)) {
      auto it = latency->find(t.key);
      if (it != latency->end()) {
        known_seconds += t.weight * it->second;
        known_flops += t.weight * t.flops;
      } else {
        unknown_flops += t.weight * t.flops;
      }
    }
    if (known_seconds <= 0) return subst::graph_cost(candidate, fallback);
    const double seconds_per_flop = known_flops > 0 ? known_seconds / known_flops : 1 / fallback.flops_per_second;
    return known_seconds + unknown_flops * seconds_per_flop;
  };
}

}  // namespace kiln
