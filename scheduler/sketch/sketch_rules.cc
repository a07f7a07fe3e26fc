// The CPU sketch rules, in Ansor's order. Each is a condition and an apply.
#include <fmt/format.h>

#include <algorithm>

#include <set>

#include "scheduler/sketch/packing.h"
#include "scheduler/sketch/sketch_rule.h"
#include "scheduler/state/steps/cache_steps.h"
#include "scheduler/state/steps/compute_location_steps.h"
#include "scheduler/state/steps/fuse_step.h"
#include "scheduler/state/steps/layout_rewrite_step.h"
#include "scheduler/state/steps/rfactor_step.h"
#include "scheduler/state/steps/split_step.h"
#include "scheduler/state/steps/attachments.h"
#include "scheduler/state/stage_exprs.h"
#include "scheduler/te/analysis.h"

namespace kiln::sketch {

using namespace state;
using Condition = SketchRule::Condition;
using Next = std::vector<std::pair<State, int>>;

namespace {

bool schedulable(const State& s, int stage) {
  const Stage& st = s.stage(stage);
  return st.kind == StageKind::Compute && st.compute_at != ComputeAtKind::Inlined;
}

// The only consumer of `stage` (through inlined stages) when the path to it is elementwise, else -1.
int single_elementwise_consumer(const State& s, const StateDag& d, int stage) {
  std::vector<int> c = d.consumers(s, stage);
  if (c.size() != 1 || !schedulable(s, c[0])) return -1;
  // A consumer already tiled (it needs tiling itself) cannot follow this stage's tiles.
  if (!s.stage(c[0]).relations.empty()) return -1;
  return d.analysis->elementwise_match(d.tensor(stage), d.tensor(c[0])) ? c[0] : -1;
}

bool needs_tiling(const State& s, const StateDag& d, int stage) {
  return schedulable(s, stage) && s.stage(stage).relations.empty() && d.analysis->needs_multi_level_tiling(d.tensor(stage));
}

// Inline what costs nothing to inline: elementwise and broadcast stages without expensive math.
class AlwaysInline : public SketchRule {
 public:
  const char* name() const override { return "always-inline"; }
  Condition condition(const State& s, const StateDag& d, int stage, const SearchParams&) const override {
    if (!schedulable(s, stage) || is_output_stage(s, stage) || is_packing_stage(s, stage)) return Condition::Pass;
    if (!d.analysis->should_always_inline(d.tensor(stage))) return Condition::Pass;
    for (int c : consumers_through_inlined(s, stage))
      if (s.stage(c).kind != StageKind::Compute) return Condition::Pass;  // a runtime kernel reads it
    return Condition::ApplyAndSkipRest;
  }
  Next apply(const State& s, const StateDag&, int stage, const SearchParams&) const override {
    State n = s;
    n.apply(std::make_shared<ComputeInlineStep>(stage));
    return {{n, stage - 1}};
  }
};

// A reduction over a long axis with little spatial work: split the reduction and make one part a
// spatial axis that can be parallelized or vectorized.
class AddRfactor : public SketchRule {
 public:
  const char* name() const override { return "add-rfactor"; }
  Condition condition(const State& s, const StateDag& d, int stage, const SearchParams& p) const override {
    if (!schedulable(s, stage) || !s.stage(stage).relations.empty()) return Condition::Pass;
    const Stage& st = s.stage(stage);
    if (st.op->reduce_axes.empty() || d.analysis->needs_multi_level_tiling(d.tensor(stage))) return Condition::Pass;
    if (has_attached(s, stage)) return Condition::Pass;
    int64_t space = 1, reduce = 1;
    for (int64_t e : st.op->shape) space *= e;
    for (const te::IterVar& r : st.op->reduce_axes) reduce *= r.extent;
    return (reduce > space && space < p.cores * 16 && reduce >= 16) ? Condition::Apply : Condition::Pass;
  }
  Next apply(const State& s, const StateDag&, int stage, const SearchParams&) const override {
    State base = s;
    const Stage& st = base.stage(stage);
    const int rank = static_cast<int>(st.op->axes.size());
    const int nr = static_cast<int>(st.op->reduce_axes.size());
    if (nr > 1) {
      std::vector<int> ids;
      for (int k = 0; k < nr; ++k) ids.push_back(rank + k);
      base.apply(std::make_shared<FuseStep>(stage, ids));
    }
    const int64_t extent = base.stage(stage).node_of(rank).extent;
    // rfactor needs a chosen length (its new axis has that extent): 1, as Ansor; fill-tile-size draws it.
    base.apply(std::make_shared<SplitStep>(stage, rank, extent, std::vector<std::optional<int64_t>>{1}));
    Next out;
    for (int which : {rank + 1, rank}) {  // the inner part first, as Ansor orders them
      State n = base;
      n.apply(std::make_shared<RfactorStep>(stage, which, rank));
      out.push_back({n, stage - 1});
    }
    return out;
  }
};

// A stage to be tiled whose right-hand operand is an input computed at run time (not a weight, whose
// layout is rewritten instead) gets a variant that reads a packed copy of it (packing.h). The sketch
// without the copy goes on through the rules below.
class AddPackingCacheRead : public SketchRule {
 public:
  const char* name() const override { return "add-packing-cache-read"; }
  Condition condition(const State& s, const StateDag& d, int stage, const SearchParams&) const override {
    if (!needs_tiling(s, d, stage)) return Condition::Pass;
    const int operand = right_hand_operand(s, stage);
    if (operand < 0) return Condition::Pass;
    for (const te::TensorRef& w : te::reduction_weights(s.dag()))
      if (w.get() == s.stage(operand).tensor.get()) return Condition::Pass;
    return Condition::Apply;
  }
  Next apply(const State& s, const StateDag&, int stage, const SearchParams&) const override {
    State n = s;
    n.apply(std::make_shared<CacheReadStep>(right_hand_operand(s, stage), kPackScope, std::vector<int>{stage}));
    return {{n, stage + 1}};  // the copy is inserted before the stage
  }
};

// A tiled stage whose result is not consumed elementwise gets a local accumulator stage, tiled and
// fused into the original (which becomes the copy-out).
class AddCacheWrite : public SketchRule {
 public:
  const char* name() const override { return "add-cache-write"; }
  Condition condition(const State& s, const StateDag& d, int stage, const SearchParams&) const override {
    if (!needs_tiling(s, d, stage) || single_elementwise_consumer(s, d, stage) >= 0) return Condition::Pass;
    return Condition::Apply;
  }
  Next apply(const State& s, const StateDag&, int stage, const SearchParams&) const override {
    State n = s;
    n.apply(std::make_shared<CacheWriteStep>(stage, "local"));
    return {{n, stage}};  // the new local stage is at `stage`; the copy-out follows it
  }
};

// Tile the stage SSRSRS and fuse its elementwise consumer into its outer tiles, at level 1 or 2.
class MultiLevelTilingWithFusion : public SketchRule {
 public:
  const char* name() const override { return "multi-level-tiling-with-fusion"; }
  Condition condition(const State& s, const StateDag& d, int stage, const SearchParams&) const override {
    if (!needs_tiling(s, d, stage) || single_elementwise_consumer(s, d, stage) < 0) return Condition::Pass;
    return Condition::ApplyAndSkipRest;
  }
  Next apply(const State& s, const StateDag& d, int stage, const SearchParams&) const override {
    const int target = single_elementwise_consumer(s, d, stage);
    State tiled = s;
    std::vector<int> splits = multi_level_tiling(tiled, stage, "SSRSRS");
    Next out;
    for (int level : {1, 2}) {
      State n = tiled;
      std::vector<int> cumulative = follow_tiling(n, target, splits, level);
      const int iter = cumulative[static_cast<size_t>(level - 1)] - 1;
      n.apply(std::make_shared<ComputeAtStep>(stage, target, iter));
      out.push_back({n, stage - 1});
    }
    return out;
  }
};

class MultiLevelTiling : public SketchRule {
 public:
  const char* name() const override { return "multi-level-tiling"; }
  Condition condition(const State& s, const StateDag& d, int stage, const SearchParams&) const override {
    return needs_tiling(s, d, stage) ? Condition::ApplyAndSkipRest : Condition::Pass;
  }
  Next apply(const State& s, const StateDag&, int stage, const SearchParams&) const override {
    State n = s;
    multi_level_tiling(n, stage, "SSRSRS");
    return {{n, stage - 1}};
  }
};

class Skip : public SketchRule {
 public:
  const char* name() const override { return "skip"; }
  Condition condition(const State&, const StateDag&, int, const SearchParams&) const override { return Condition::Apply; }
  Next apply(const State& s, const StateDag&, int stage, const SearchParams&) const override { return {{s, stage - 1}}; }
};

}  // namespace

const std::vector<std::unique_ptr<SketchRule>>& cpu_sketch_rules() {
  static const auto rules = [] {
    std::vector<std::unique_ptr<SketchRule>> r;
    r.push_back(std::make_unique<AlwaysInline>());
    r.push_back(std::make_unique<AddRfactor>());
    r.push_back(std::make_unique<AddPackingCacheRead>());
    r.push_back(std::make_unique<AddCacheWrite>());
    r.push_back(std::make_unique<MultiLevelTilingWithFusion>());
    r.push_back(std::make_unique<MultiLevelTiling>());
    r.push_back(std::make_unique<Skip>());
    return r;
  }();
  return rules;
}

namespace {

// `s` with the layout of every weight a reduction reads rewritten into the order its loops walk it
// (steps/layout_rewrite_step.h): always, as in Ansor; the default schedule is the baseline without it.
State with_weight_layouts(State s) {
  const std::vector<te::TensorRef> weights = te::reduction_weights(s.dag());
  for (int i = 0; i < static_cast<int>(s.stages().size()); ++i)
    if (s.stage(i).kind == StageKind::Placeholder && std::find(weights.begin(), weights.end(), s.stage(i).tensor) != weights.end())
      s.apply(std::make_shared<LayoutRewriteStep>(i));
  return s;
}

}  // namespace

std::vector<State> generate_sketches(const State& initial, const SearchParams& p) {
  std::vector<State> out;
  std::set<std::string> seen;
  std::vector<std::pair<State, int>> work{{initial, static_cast<int>(initial.stages().size()) - 1}};
  while (!work.empty()) {
    auto [s, stage] = work.back();
    work.pop_back();
    if (stage < 0) {
      State sketch = with_weight_layouts(std::move(s));
      if (seen.insert(print_state(sketch)).second) out.push_back(std::move(sketch));
      continue;
    }
    StateDag d = make_state_dag(s);
    for (const auto& rule : cpu_sketch_rules()) {
      Condition c = rule->condition(s, d, stage, p);
      if (c == Condition::Pass) continue;
      std::vector<std::pair<State, int>> next;
      try {
        next = rule->apply(s, d, stage, p);
      } catch (const ScheduleError&) {
        continue;  // the rule's steps do not apply to this state: as if its condition had not held
      }
      for (auto& n : next) work.push_back(std::move(n));
      if (c == Condition::ApplyAndSkipRest) break;
    }
  }
  return out;
}

}  // namespace kiln::sketch
