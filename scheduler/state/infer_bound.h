/// \file Bound inference: how much of a stage one execution of its loop nest computes. A stage at root
/// computes its whole domain; a stage computed at a loop of another computes, per iteration of that
/// loop, the region its consumer's inner loops read. Its loops shrink accordingly, which is what the
/// printed state shows and what lowering allocates.
#pragma once
#include <vector>

#include "scheduler/state/state.h"

namespace kiln::state {

/// The part of one root's domain a stage's nest covers: start + [0, extent). `start` is null for 0 and
/// otherwise an expression of the enclosing loops' variables. `may_leave_domain`: start + k can fall
/// outside [0, domain), so computations there are guarded.
struct RootRegion {
  te::Expr start;
  int64_t extent = 0;
  bool may_leave_domain = false;
};

struct Bounds {
  std::vector<Stage> stages;                     // with root extents set to their regions' extents
  std::vector<std::vector<RootRegion>> regions;  // per stage, per root
};

/// `node_vars` (make_node_vars) are the loop variables region starts are written in. A region whose
/// extent depends on an unchosen split length has extent -1.
Bounds infer_bounds(const State& s, const std::vector<std::vector<te::Expr>>& node_vars);

/// The stages with inferred extents, for printing.
std::vector<Stage> infer_bound(const State& s);

}  // namespace kiln::state
