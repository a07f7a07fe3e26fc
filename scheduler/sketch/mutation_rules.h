/// \file Mutation rules of the evolutionary search: small random edits of a complete program's step
/// list, replayed. Ansor's CPU weights: tile size 0.90, auto-unroll 0.04, compute location 0.05,
/// parallel 0.01; kiln adds the vector axis (vector_axis.h), 0.02.
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "scheduler/sketch/init_rules.h"

namespace kiln::sketch {

class MutationRule {
 public:
  virtual ~MutationRule() = default;
  virtual const char* name() const = 0;
  virtual double weight() const = 0;
  /// A mutated copy, or nullopt when this rule finds nothing to change or the change does not replay.
  virtual std::optional<state::State> apply(const state::State& s, const SearchParams& p, Rng& rng) const = 0;
};

const std::vector<std::unique_ptr<MutationRule>>& cpu_mutation_rules();

/// One mutation: a rule drawn by weight, retried with other draws a few times when it finds nothing.
std::optional<state::State> mutate(const state::State& s, const SearchParams& p, Rng& rng);

}  // namespace kiln::sketch
