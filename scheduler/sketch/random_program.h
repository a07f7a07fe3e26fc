/// \file A random program of a task: a sketch drawn at random, completed by the init-population rules.
/// What `kiln compile --schedule random` builds and what the property tests check at scale.
#pragma once
#include <vector>

#include "scheduler/sketch/init_rules.h"

namespace kiln::sketch {

/// Draws until a sketch completes (a few tries); throws ScheduleError if none does.
state::State sample_program(const std::vector<state::State>& sketches, const SearchParams& p, Rng& rng);

}  // namespace kiln::sketch
