/// \file The vector axis of a multi-level tiled stage as a search choice: which spatial loop of the
/// innermost tile level is innermost, so that the vectorize rule fuses and vectorizes it.
///
/// Why: the tiling keeps the loop order in every level, so the innermost loop is the last axis's
/// (a blocked layout's channel block, a matmul's columns). That is the right vector for most of
/// kiln's layouts, but not for a stage whose last axis is short or strided in what it reads (an
/// NCHW image's few channels, a matrix of a few columns); there a spatial axis is the better vector.
/// The choice is one reorder of the innermost level, recorded as the tiling's own "RE" step, so old
/// records replay unchanged and a mutation can flip it.
#pragma once
#include <optional>
#include <utility>
#include <vector>

#include "scheduler/state/state.h"

namespace kiln::sketch {

/// One tiling reorder whose innermost spatial level holds at least two loops longer than 1.
struct VectorAxisChoice {
  size_t step = 0;                             // the ReorderStep in the state's steps
  std::vector<int> outer;                      // its order up to the last reduction loop (loop positions)
  std::vector<std::pair<int, int>> innermost;  // (node, loop position) of the innermost level, in axis order
  std::vector<int> others;  // the level's loops longer than 1 other than the innermost such loop: the choices
};

/// The vector-axis choices of a complete program or a sketch whose tile sizes are chosen.
std::vector<VectorAxisChoice> vector_axis_choices(const state::State& s);

/// `s` with `c`'s reorder putting node `node` innermost and the level's other loops in axis order,
/// replayed; nullopt when it does not replay.
std::optional<state::State> with_vector_axis(const state::State& s, const VectorAxisChoice& c, int node);

}  // namespace kiln::sketch
