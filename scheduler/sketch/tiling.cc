// Multi-level tiling and follow tiling, shared by the tiling sketch rules.
#include <fmt/format.h>

#include "scheduler/sketch/sketch_rule.h"
#include "scheduler/state/steps/follow_split_step.h"
#include "scheduler/state/steps/reorder_step.h"
#include "scheduler/state/steps/split_step.h"

namespace kiln::sketch {

using namespace state;

std::vector<int> multi_level_tiling(State& s, int stage, const std::string& structure) {
  int n_space = 0, n_reduce = 0;
  for (char c : structure) (c == 'S' ? n_space : n_reduce)++;
  // Per level, the nodes of the loops at that level, in original loop order.
  std::vector<std::vector<int>> space_levels(static_cast<size_t>(n_space)), reduce_levels(static_cast<size_t>(n_reduce));
  std::vector<int> split_steps;
  const size_t n = s.stage(stage).iters.size();
  size_t pos = 0;
  for (size_t k = 0; k < n; ++k) {
    const Stage& st = s.stage(stage);
    const IterNode& node = st.node_of(static_cast<int>(pos));
    const bool spatial = node.kind == IteratorKind::Spatial;
    const int levels = spatial ? n_space : n_reduce;
    auto& out = spatial ? space_levels : reduce_levels;
    if (levels <= 1 || node.extent == 1) {
      // Nothing to split: the loop stays at its outermost level.
      out[0].push_back(st.iters[pos].node);
      ++pos;
      if (spatial) split_steps.push_back(-1);
      continue;
    }
    if (spatial) split_steps.push_back(static_cast<int>(s.steps().size()));
    s.apply(std::make_shared<SplitStep>(stage, static_cast<int>(pos), node.extent,
                                        std::vector<std::optional<int64_t>>(static_cast<size_t>(levels - 1)), true));
    const Stage& after = s.stage(stage);
    for (int l = 0; l < levels; ++l) out[static_cast<size_t>(l)].push_back(after.iters[pos + static_cast<size_t>(l)].node);
    pos += static_cast<size_t>(levels);
  }
  std::vector<int> order_nodes;
  int si = 0, ri = 0;
  for (char c : structure) {
    auto& lv = c == 'S' ? space_levels[static_cast<size_t>(si++)] : reduce_levels[static_cast<size_t>(ri++)];
    order_nodes.insert(order_nodes.end(), lv.begin(), lv.end());
  }
  const Stage& st = s.stage(stage);
  std::vector<int> order;
  for (int node : order_nodes) order.push_back(st.iter_of_node(node));
  s.apply(std::make_shared<ReorderStep>(stage, order));
  return split_steps;
}

std::vector<int> follow_tiling(State& s, int stage, const std::vector<int>& split_steps, int n_split) {
  const int rank = static_cast<int>(s.stage(stage).op->axes.size());
  if (static_cast<int>(split_steps.size()) != rank)
    throw ScheduleError(fmt::format("follow_tiling: '{}' has {} axes, the producer's tiling {}", s.stage(stage).name(), rank, split_steps.size()));
  std::vector<std::vector<int>> levels(static_cast<size_t>(n_split + 1));
  size_t pos = 0;
  for (int k = 0; k < rank; ++k) {
    const Stage& st = s.stage(stage);
    if (split_steps[static_cast<size_t>(k)] < 0) {
      levels[0].push_back(st.iters[pos++].node);
      continue;
    }
    s.apply(std::make_shared<FollowSplitStep>(stage, static_cast<int>(pos), split_steps[static_cast<size_t>(k)], n_split));
    const Stage& after = s.stage(stage);
    for (int l = 0; l <= n_split; ++l) levels[static_cast<size_t>(l)].push_back(after.iters[pos + static_cast<size_t>(l)].node);
    pos += static_cast<size_t>(n_split + 1);
  }
  std::vector<int> order, cumulative;
  const Stage& st = s.stage(stage);
  for (const auto& lv : levels) {
    for (int node : lv) order.push_back(st.iter_of_node(node));
    cumulative.push_back(static_cast<int>(order.size()));
  }
  s.apply(std::make_shared<ReorderStep>(stage, order));
  return cumulative;
}

}  // namespace kiln::sketch
