/// \file Per-store features of a lowered program: what the cost model sees of a candidate.
///
/// Ansor's features (TVM's auto_scheduler/feature.cc), computed on kiln's loop IR: one row per Store
/// statement, describing the store's own computation, the loops around it, the buffers it touches and
/// how they are reused, so a model trained on some programs generalizes to others of any shape. The 164
/// values of Ansor's layout keep their order; Ansor leaves the multiply-add count and the position of
/// vectorized/unrolled/parallel loops at zero, kiln fills them. Every value is log2(1 + x) scaled.
#pragma once
#include <string>
#include <vector>

#include "scheduler/lower/loop_ir.h"
#include "scheduler/state/state.h"

namespace kiln::search {

/// Values per store row.
inline constexpr int kFeaturesPerStore = 164;

/// One row per Store of a program, in program order.
using ProgramFeatures = std::vector<std::vector<float>>;

/// The name of each value of a row, in order ("float_mad", "B0.bytes", ...).
const std::vector<std::string>& feature_names();

/// The rows of a lowered function. `cache_line_bytes` sizes the cache-line reuse features.
ProgramFeatures extract_features(const lower::LoweredFunc& f, int cache_line_bytes = 64);

/// Lowers `s` (lower::lower_state_func) and extracts its rows. Throws state::ScheduleError when the state
/// does not lower.
ProgramFeatures state_features(const state::State& s, int cache_line_bytes = 64);

}  // namespace kiln::search
