/// \file How `kiln compile` and compiled conformance schedule each task: the default schedule, a
/// random program from the task's sketches (every point of the search space must compute the model;
/// this is how whole models check it), or the best tuning record of each task (`--records`, what
/// tuning is for), with the sketches and chosen programs printable per task.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "frontend/ir/graph.h"
#include "scheduler/lower/lower_model.h"
#include "toolchain/compile.h"

namespace kiln {

struct ScheduleChoice {
  /// Records: the best valid record per task for the target's name (backends/measure/records.h),
  /// replayed on each occurrence; a task without one, or whose record does not replay or lower, gets
  /// the default schedule and one note, so a partial log still compiles a correct model.
  enum class Kind { Default, Random, Records };
  Kind kind = Kind::Default;
  uint64_t seed = 0;
  std::string records_path;  // Kind::Records: the records file (JSON lines, docs/records.md)
  /// "analysis" (facts per stage), "sketch" (the sketches), "schedule" (the random or recorded program
  /// chosen): printed once per task through `on_dump`.
  std::vector<std::string> dump_after;
  std::function<void(const std::string& step, const std::string& text)> on_dump;
  /// One line (no newline) per task that Kind::Records could not schedule from a record; null prints
  /// it on stderr. A function so conformance and tests can collect them.
  std::function<void(const std::string& line)> on_note;
};

/// Parses "default" or "random"; throws Error naming the flag otherwise. (Kind::Records comes from
/// `--records`, not from `--schedule`.)
ScheduleChoice::Kind parse_schedule_kind(const std::string& s);

/// The kind the flags `--schedule S` and `--records R` (empty when not given) ask for: Records when R
/// is given, then S must be "default" (a record and a random draw would fight over the same task);
/// throws Error naming the flags otherwise.
ScheduleChoice::Kind schedule_kind_of_flags(const std::string& schedule, const std::string& records_path);

/// The scheduler for the choice when compiling `g` (whose tasks name themselves in notes by anchor op
/// and first node); null (the package's default) when nothing is random, recorded or dumped. Kind::Records
/// reads the records file now and throws kiln::Error naming it when it is missing or unreadable.
lower::SubgraphScheduler make_subgraph_scheduler(const ScheduleChoice& choice, const CompileTarget& target,
                                                 const Graph& g);

}  // namespace kiln
