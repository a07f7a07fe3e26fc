#include "toolchain/task_table.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln {

namespace {

std::string human_flops(double v) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f}", v) : fmt::format("{:.2f} {}", v, units[u]);
}

// The first few node names of an occurrence; long fused chains end in "(+n more)".
std::string node_list(const std::vector<std::string>& names) {
  constexpr size_t kShown = 4;
  std::string s;
  for (size_t i = 0; i < names.size() && i < kShown; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > kShown) s += fmt::format(" (+{} more)", names.size() - kShown);
  return s;
}

}  // namespace

std::string format_task_table(const SubgraphDAG& dag, const std::vector<Task>& tasks, double op_flops) {
  std::vector<const Task*> sorted;
  double total = 0;
  for (const Task& t : tasks) {
    sorted.push_back(&t);
    total += t.weight * t.flops;
  }
  std::stable_sort(sorted.begin(), sorted.end(), [](const Task* a, const Task* b) {
    double fa = a->weight * a->flops, fb = b->weight * b->flops;
    return fa != fb ? fa > fb : a->key < b->key;
  });
  std::string out = fmt::format("tasks    {} distinct, from {} subgraphs of {} run-time nodes\n", tasks.size(),
                                dag.subgraphs.size(), [&] {
                                  size_t n = 0;
                                  for (const Subgraph& sg : dag.subgraphs) n += sg.nodes.size();
                                  return n;
                                }());
  out += fmt::format("  {:<3} {:<16} {:>6} {:>12} {:>14} {:>6}  {:<18} {}\n", "#", "key", "weight", "flops/occ",
                     "weight*flops", "share", "anchor", "nodes (first occurrence)");
  for (size_t i = 0; i < sorted.size(); ++i) {
    const Task& t = *sorted[i];
    double wf = t.weight * t.flops;
    out += fmt::format("  {:<3} {:<16} {:>6} {:>12} {:>14} {:>5.1f}%  {:<18} {}\n", i, t.key, t.weight,
                       human_flops(t.flops), human_flops(wf), total > 0 ? 100 * wf / total : 0.0, t.anchor,
                       node_list(t.node_names));
  }
  out += fmt::format("total    {} ({:.0f}) over all subgraphs", human_flops(total), total);
  if (op_flops >= 0)
    out += fmt::format("; op-level {} ({:.0f}){}", human_flops(op_flops), op_flops,
                       op_flops > 0 ? fmt::format(", ratio {:.4f}", total / op_flops) : std::string());
  out += "\n";
  return out;
}

}  // namespace kiln
