/// \file Register-tile seeds: a few complete programs per sketch whose tile sizes are chosen the way
/// kiln's default schedule (and a person writing a GEMM kernel) tiles a CPU loop nest: the innermost
/// spatial loop vectorized in a tile of one to two vector widths, a few rows of another spatial loop
/// unrolled beside it so that the tile's accumulators stay in registers, the reduction inside, and in
/// one variant a second level that keeps a block of the right-hand operand in cache.
///
/// Why: random tile sizes almost never land on a good register tile, and the cost model only learns
/// after dozens of samples, so with small budgets Ansor's search starts far below the default
/// schedule. The search measures these first and mutates from them (a departure from Ansor, which has
/// no seeds).
#pragma once
#include <vector>

#include "scheduler/sketch/search_params.h"
#include "scheduler/state/state.h"

namespace kiln::sketch {

/// Seed programs for the given sketches, most default-like first, deduplicated by their printed nest.
/// Sketches with an rfactor step, a packing copy or without multi-level tiling contribute none.
std::vector<state::State> register_tile_seeds(const std::vector<state::State>& sketches, const SearchParams& p);

}  // namespace kiln::sketch
