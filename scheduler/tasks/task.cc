#include "scheduler/tasks/task.h"

#include <algorithm>
#include <limits>
#include <map>

#include "frontend/ir/error.h"
#include "frontend/partition/step_loop_partition.h"
#include "scheduler/tasks/dag_flops.h"
#include "scheduler/tasks/lower_subgraph.h"
#include "scheduler/tasks/workload_key.h"

namespace kiln {

std::vector<Task> extract_tasks(const Graph& g, const SubgraphDAG& dag, const std::set<int>& runs_no_code) {
  std::vector<Task> tasks;
  std::map<std::string, size_t> by_key;
  // Subgraph `sg` of `graph`, which runs `runs` times an inference.
  auto add = [&](const Graph& graph, const Subgraph& sg, int64_t runs) {
    LoweredSubgraph ls = lower_subgraph(graph, sg);
    std::string canonical = canonical_dag_text(ls.dag);
    std::string key = fnv1a64_hex(canonical);
    auto [it, added] = by_key.emplace(key, tasks.size());
    if (added) {
      Task t;
      t.key = key;
      t.canonical = std::move(canonical);
      t.dag = std::move(ls.dag);
      t.flops = dag_flops(t.dag);
      t.anchor = graph.nodes[sg.anchor].op_type;
      for (int gi : sg.nodes) t.node_names.push_back(graph.nodes[gi].name);
      tasks.push_back(std::move(t));
    }
    Task& t = tasks[it->second];
    if (!added && t.canonical != canonical)
      throw Error("workload key " + key + " names two different subgraphs (hash collision)");
    t.subgraphs.push_back(sg.id);
    t.weight = static_cast<int>(std::min<int64_t>(int64_t{t.weight} + runs, std::numeric_limits<int>::max()));
  };
  for (size_t k = 0; k < dag.subgraphs.size(); ++k) {
    const Subgraph& sg = dag.subgraphs[k];
    if (runs_no_code.count(static_cast<int>(k)) || is_step_loop_subgraph(g, sg)) continue;
    add(g, sg, 1);
  }
  // A loop body's subgraphs run once an iteration.
  for (const StepLoopPartition& p : partition_step_loops(g, dag))
    for (const Subgraph& sg : p.body.subgraphs) add(*p.loop.body, sg, p.loop.trip_count);
  return tasks;
}

}  // namespace kiln
