/// \file Sketch rules: how Ansor derives the high-level structures of a program (which stages are
/// inlined, tiled, cached, fused) before any tile size is chosen. Rules visit the stages from the
/// output backwards; each is a small named class with a condition and an apply, listed in order in
/// cpu_sketch_rules().
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/sketch/search_params.h"
#include "scheduler/sketch/state_dag.h"
#include "scheduler/state/state.h"

namespace kiln::sketch {

class SketchRule {
 public:
  enum class Condition { Pass, Apply, ApplyAndSkipRest };
  virtual ~SketchRule() = default;
  virtual const char* name() const = 0;
  virtual Condition condition(const state::State& s, const StateDag& d, int stage, const SearchParams& p) const = 0;
  /// New states and the stage each continues from.
  virtual std::vector<std::pair<state::State, int>> apply(const state::State& s, const StateDag& d, int stage,
                                                          const SearchParams& p) const = 0;
};

/// Ansor's CPU order: always-inline, add-rfactor, add-cache-write, multi-level tiling with fusion,
/// multi-level tiling, skip; kiln adds add-packing-cache-read (packing.h) before add-cache-write.
const std::vector<std::unique_ptr<SketchRule>>& cpu_sketch_rules();

/// The sketches of a DAG (deduplicated by their printed state).
std::vector<state::State> generate_sketches(const state::State& initial, const SearchParams& p);

/// The multi-level tiling of stage `stage` with a structure such as "SSRSRS": every spatial loop split
/// into as many levels as there are S, every reduction loop into as many as R, lengths unchosen,
/// reordered level by level. Returns the ids of the spatial split steps (one per spatial loop).
std::vector<int> multi_level_tiling(state::State& s, int stage, const std::string& structure);

/// Splits the spatial loops of `stage` following `split_steps` into n_split + 1 levels, reordered level
/// by level (what a fused consumer does to line up with its tiled producer). Returns, per level, how many
/// of the stage's loops are at that level or outside it.
std::vector<int> follow_tiling(state::State& s, int stage, const std::vector<int>& split_steps, int n_split);

}  // namespace kiln::sketch
