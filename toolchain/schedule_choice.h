/// \file The schedule stage: how `kiln compile` and compiled conformance schedule each task. The
/// default schedule; a random program from the task's sketches (every point of the search space must
/// compute the model, and this is how whole models check it); or the best tuning record of each task
/// (`--records`, what tuning is for). One program per task, replayed on every occurrence of the task
/// by the lower stage, so every occurrence of a layer runs the same code.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "scheduler/lower/lower_gpu.h"
#include "scheduler/lower/lower_model.h"
#include "scheduler/sketch/sketch_rule.h"
#include "scheduler/state/state.h"
#include "scheduler/tasks/task.h"
#include "toolchain/compile_target.h"
#include "toolchain/stage_dump.h"

namespace kiln {

struct ScheduleChoice {
  /// Records: the best valid record per task for the target's name (backends/measure/records.h); a
  /// task without one, or whose record does not replay or lower, gets the default schedule and one
  /// note, so a partial log still compiles a correct model.
  /// GpuSerial: the default GPU schedule (scheduler/lower/lower_gpu.h) compiled for a CPU target, its
  /// blocks and threads run one after another: how GPU programs are checked where there is no GPU.
  /// GpuSerialRandom: the same with a random shared-memory tile (or none) for each matmul and
  /// convolution, drawn with `seed`, as Random gives a CUDA target.
  enum class Kind { Default, Random, Records, GpuSerial, GpuSerialRandom };
  Kind kind = Kind::Default;
  uint64_t seed = 0;
  std::string records_path;  // Kind::Records: the records file (JSON lines, docs/records.md)
  /// One line (no newline) per task that Kind::Records could not schedule from a record; null prints
  /// it on stderr. A function so conformance and tests can collect them.
  std::function<void(const std::string& line)> on_note;
};

/// Parses "default", "random", "gpu-serial" or "gpu-serial-random"; throws Error naming the flag otherwise. (Kind::Records comes from
/// `--records`, not from `--schedule`.)
ScheduleChoice::Kind parse_schedule_kind(const std::string& s);

/// The kind the flags `--schedule S` and `--records R` (empty when not given) ask for: Records when R
/// is given, then S must be "default" (a record and a random draw would fight over the same task);
/// throws Error naming the flags otherwise.
ScheduleChoice::Kind schedule_kind_of_flags(const std::string& schedule, const std::string& records_path);

/// The schedule stage's result: the program chosen for each task (nullopt: the default schedule).
struct ModelSchedule {
  ScheduleChoice choice;
  sketch::SearchParams params;          // the target's cores and vector lanes
  lower::ScheduleParams default_params;  // the target's vector width
  std::vector<std::string> task_of_subgraph;  // task key per subgraph id
  std::map<std::string, std::optional<state::State>> program_of_task;
  std::map<std::string, std::string> label_of_task;  // "Conv conv1": how a note names a task to a user
  std::set<std::string> noted;                        // tasks that already printed a note
  /// A CUDA target's GPU schedule limits: a record's gpu_tile steps must name tiles within them to
  /// replay (lower::gpu_stage_tiles), as a CPU record's steps must apply.
  std::optional<lower::GpuScheduleParams> gpu;
};

/// Chooses every task's program. Dumps "analysis" and "sketch" per task when `dump` wants them, and
/// "schedule" (the chosen program, or "default schedule") per task. Kind::Records reads the records
/// file now and throws Error naming it when it is missing or unreadable.
ModelSchedule choose_schedules(const std::vector<Task>& tasks, size_t num_subgraphs, const ScheduleChoice& choice,
                               const CompileTarget& target, const StageDump& dump);

/// The lower stage's scheduler: each subgraph replays its task's program on its own DAG (same workload
/// key, so the same stages in the same order). A recorded program that does not replay or lower falls
/// back to the default schedule with one note per task; a random one that does not replay is drawn
/// again for that occurrence.
lower::SubgraphScheduler subgraph_scheduler(std::shared_ptr<ModelSchedule> schedule);

}  // namespace kiln
