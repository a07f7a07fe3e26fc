/// \file How `kiln compile` and compiled conformance schedule each task: the default schedule, or a
/// random program from the task's sketches (every point of the search space must compute the model;
/// this is how whole models check it), with the sketches and chosen programs printable per task.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "scheduler/lower/lower_model.h"
#include "toolchain/compile.h"

namespace kiln {

struct ScheduleChoice {
  enum class Kind { Default, Random };
  Kind kind = Kind::Default;
  uint64_t seed = 0;
  /// "analysis" (facts per stage), "sketch" (the sketches), "schedule" (the random program chosen):
  /// printed once per task through `on_dump`.
  std::vector<std::string> dump_after;
  std::function<void(const std::string& step, const std::string& text)> on_dump;
};

/// Parses "default" or "random"; throws Error naming the flag otherwise.
ScheduleChoice::Kind parse_schedule_kind(const std::string& s);

/// The scheduler for the choice; null (the package's default) when nothing is random or dumped.
lower::SubgraphScheduler make_subgraph_scheduler(const ScheduleChoice& choice, const CompileTarget& target);

}  // namespace kiln
