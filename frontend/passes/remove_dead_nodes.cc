#include "frontend/passes/remove_dead_nodes.h"

#include <set>

namespace kiln {

void remove_dead_nodes(Graph& g) {
  std::set<std::string> live(g.outputs.begin(), g.outputs.end());
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t k = g.nodes.size(); k-- > 0;) {
    const Node& n = g.nodes[k];
    bool needed = false, all_constant = true;
    for (const auto& o : n.outputs) {
      if (o.empty()) continue;
      needed |= live.count(o) != 0;
      all_constant &= g.value(o).constant != nullptr;
    }
    if (!needed || all_constant) continue;
    keep[k] = true;
    for (const auto& in : n.inputs)
      if (!in.empty()) live.insert(in);
  }
  std::vector<Node> kept;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    if (keep[k]) kept.push_back(std::move(g.nodes[k]));
  g.nodes = std::move(kept);
  for (const auto& in : g.inputs) live.insert(in);
  for (const Node& n : g.nodes)
    for (const auto& o : n.outputs)
      if (!o.empty()) live.insert(o);
  std::erase_if(g.values, [&](const auto& kv) { return !live.count(kv.first); });
}

}  // namespace kiln
