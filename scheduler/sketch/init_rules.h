/// \file Init-population rules: how a sketch becomes a complete program by random choices — tile
/// sizes, compute locations, parallel and vector loops, unrolling. Every choice draws from the
/// generator passed in, so a seed reproduces a population.
#pragma once
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "scheduler/sketch/search_params.h"
#include "scheduler/state/state.h"

namespace kiln::sketch {

using Rng = std::mt19937_64;

class InitRule {
 public:
  virtual ~InitRule() = default;
  virtual const char* name() const = 0;
  /// The state completed by this rule's choices; nullopt when the choices do not make a valid state.
  virtual std::optional<state::State> apply(const state::State& s, const SearchParams& p, Rng& rng) const = 0;
};

/// Ansor's CPU order: fill tile sizes, change compute location, parallel, auto-unroll, vectorize; kiln
/// draws the vector axis (vector_axis.h) after the tile sizes.
const std::vector<std::unique_ptr<InitRule>>& cpu_init_rules();

/// A random complete program from a sketch (all init rules in order), or nullopt if a rule failed.
std::optional<state::State> complete_sketch(const state::State& sketch, const SearchParams& p, Rng& rng);

/// Random lengths for splitting `extent` into lengths.size() + 1 parts (innermost <= max_innermost):
/// exact divisors, or with some probability (always for a prime extent > 8) a padded extent whose
/// remainder the lowering guards.
std::vector<int64_t> sample_split_lengths(int64_t extent, size_t n_lengths, int64_t max_innermost, Rng& rng);

/// Where stage `stage` may be computed, as (target stage, loop) pairs, after Ansor: the loops of its
/// only consumer outside the consumer's inner tile levels (into its first reduction level when it is
/// tiled, so that a packing copy (packing.h) is made per block of the reduction), then the loops of
/// the stage that consumer is computed in, outside it. Loops of one iteration are left out.
std::vector<std::pair<int, int>> compute_location_candidates(const state::State& s, int stage);

/// The state with split step `step` (a SplitStep) given new lengths, replayed; nullopt if replay fails.
std::optional<state::State> with_split_lengths(const state::State& s, size_t step, const std::vector<int64_t>& lengths);

}  // namespace kiln::sketch
