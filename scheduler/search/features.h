/// \file Per-store features of a lowered program: what the cost model sees of a candidate.
///
/// Ansor's features (TVM's auto_scheduler/feature.cc), computed on kiln's loop IR: one row per Store
/// statement, describing the store's own computation, the loops around it, the buffers it touches and
/// how they are reused, so a model trained on some programs generalizes to others of any shape. The 164
/// values of Ansor's layout keep their order; Ansor leaves the multiply-add count and the position of
/// vectorized/unrolled/parallel loops at zero, kiln fills them. Every value is log2(1 + x) scaled.
///
/// Row layout (feature_names() spells it out): 16 operation counts (float, int: multiply-add, add/sub,
/// mul, div/mod, compare/min/max, math function, conversion; bool ops; selects), each times the
/// iterations of the loops around the store; for vectorized, unrolled and parallel loops their number,
/// extent product, innermost extent and an 8-way one-hot position of the innermost one; 8 GPU values
/// (is_gpu, the grid of GpuBlock loops, the block of the innermost GpuThread loop; zero on CPU
/// targets); the 5 buffers crossing the most cache lines x 18 access and reuse values; a 10-point
/// arithmetic-intensity curve; the stored buffer's allocation; the loops' product, count and the
/// auto-unroll pragma. A multiply feeding an add/sub counts as one multiply-add, not as both. Loops of
/// one iteration are not loops (they are folded away before code generation). In a GPU kernel, the
/// lines an access crosses follow from the step between consecutive threads where a thread loop moves
/// it: the threads of a warp access together, and consecutive elements coalesce.
///
/// Thread-safe: no shared mutable state; the search calls these from all cores at once.
#pragma once
#include <string>
#include <vector>

#include "scheduler/lower/loop_ir.h"
#include "scheduler/state/state.h"

namespace kiln::search {

/// Values per store row.
inline constexpr int kFeaturesPerStore = 164;
/// The meaning of the values: stored with the samples of a record database (backends/measure/
/// sample_database.h), which ignores samples of another version. Bump it when a value changes meaning.
inline constexpr int kFeatureVersion = 3;  // 2: whole-tensor loads of searched programs in row-major Horner form; 3: loops split at bound tests (partition_loops.h)

/// One row per Store of a program, in program order.
using ProgramFeatures = std::vector<std::vector<float>>;

/// The name of each value of a row, in order ("float_mad", "B0.bytes", ...).
const std::vector<std::string>& feature_names();

/// The rows of a lowered function. `cache_line_bytes` sizes the cache-line reuse features. The loop
/// IR keeps no trace of the auto-unroll pragma's value (only the loops it unrolled), so that value is 0
/// here; state_features fills it.
ProgramFeatures extract_features(const lower::LoweredFunc& f, int cache_line_bytes = 64);

/// Lowers `s` (lower::lower_state_func) and extracts its rows, with the auto-unroll pragma's value
/// taken from the state: each stage's innermost pragma, or that of the loop it is computed under.
/// Throws state::ScheduleError when the state does not lower.
ProgramFeatures state_features(const state::State& s, int cache_line_bytes = 64);

}  // namespace kiln::search
