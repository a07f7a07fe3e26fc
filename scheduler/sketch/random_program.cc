#include "scheduler/sketch/random_program.h"

namespace kiln::sketch {

state::State sample_program(const std::vector<state::State>& sketches, const SearchParams& p, Rng& rng) {
  if (sketches.empty()) throw state::ScheduleError("no sketches to sample from");
  for (int attempt = 0; attempt < 16; ++attempt) {
    const auto& sketch = sketches[std::uniform_int_distribution<size_t>(0, sketches.size() - 1)(rng)];
    if (auto s = complete_sketch(sketch, p, rng)) return *s;
  }
  throw state::ScheduleError("no sketch could be completed into a program");
}

}  // namespace kiln::sketch
