#include "frontend/partition/step_loop_partition.h"

#include "frontend/ir/error.h"

namespace kiln {

bool is_step_loop_subgraph(const Graph& g, const Subgraph& sg) {
  return sg.nodes.size() == 1 && is_step_loop(g.nodes[static_cast<size_t>(sg.nodes[0])]);
}

std::vector<StepLoopPartition> partition_step_loops(const Graph& g, const SubgraphDAG& sdag) {
  std::vector<StepLoopPartition> out;
  int next_id = static_cast<int>(sdag.subgraphs.size());
  for (size_t k = 0; k < sdag.subgraphs.size(); ++k) {
    const Subgraph& sg = sdag.subgraphs[k];
    if (!is_step_loop_subgraph(g, sg)) continue;
    StepLoopPartition p;
    p.subgraph = static_cast<int>(k);
    p.node = &g.nodes[static_cast<size_t>(sg.nodes[0])];
    p.loop = read_step_loop(*p.node);
    for (const Node& n : p.loop.body->nodes)
      if (is_step_loop(n)) throw Unsupported(g.source + ": " + p.node->label() + ": a loop inside a loop's body is not supported yet");
    p.body = partition_graph(*p.loop.body);
    for (Subgraph& b : p.body.subgraphs) b.id += next_id;
    for (SubgraphEdge& e : p.body.edges) {
      e.from += next_id;
      e.to += next_id;
    }
    next_id += static_cast<int>(p.body.subgraphs.size());
    out.push_back(std::move(p));
  }
  return out;
}

size_t subgraph_id_count(const SubgraphDAG& sdag, const std::vector<StepLoopPartition>& loops) {
  size_t n = sdag.subgraphs.size();
  for (const StepLoopPartition& p : loops) n += p.body.subgraphs.size();
  return n;
}

}  // namespace kiln
