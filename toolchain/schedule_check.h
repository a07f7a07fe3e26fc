/// \file Random schedules checked at scale: for every task of a model, programs drawn from its
/// sketches (random tile sizes, compute locations, parallel and vector loops, unrolling) are lowered,
/// compiled in-process and compared with the tensor-expression evaluator on random inputs. Every
/// point of the search space must compute the DAG; a mismatch is a compiler bug.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backends/measure/records.h"
#include "frontend/ir/graph.h"
#include "scheduler/sketch/search_params.h"
#include "scheduler/tasks/task.h"

namespace kiln {

struct ScheduleCheckOptions {
  int programs = 20;  // per task
  uint64_t seed = 1;
  double rtol = 1e-3, atol = 1e-4;
  /// LLVM's O3 pipeline on each program; without it compiling is ~3x faster and lowering bugs show the same.
  bool optimize = true;
  sketch::SearchParams params;
  /// When set, the tasks' recorded schedules (every record in this records file whose key is one of
  /// the model's tasks, failed ones included) are checked instead of random programs: a record the
  /// runner rejected as a wrong answer is either a compiler bug or float rounding, and this tells which.
  std::string records;
};

struct TaskScheduleCheck {
  std::string key, anchor;
  int sketches = 0, programs = 0, passed = 0;
  /// Programs the bounds check refused (scheduler/lower/bounds_check.h): never run, and never compiled
  /// into a package or measured either; counted apart from failures.
  int refused = 0;
  std::vector<std::string> refusals;  // one line each, as failures
  std::string skipped;                // why the task was not checked (a runtime-kernel op)
  std::vector<std::string> failures;  // one line each: program number, error, and its steps as JSON
};

/// Checks one task's DAG.
TaskScheduleCheck check_task_schedules(const Task& task, const ScheduleCheckOptions& o);

/// Checks one task's recorded schedules: the records of `records` with its key.
TaskScheduleCheck check_task_records(const Task& task, const std::vector<measure::Record>& records,
                                     const ScheduleCheckOptions& o);

/// Checks every task of a model (its records when o.records is set); `on_task` reports each as it finishes.
std::vector<TaskScheduleCheck> check_model_schedules(const Graph& g, const ScheduleCheckOptions& o,
                                                     const std::function<void(const TaskScheduleCheck&)>& on_task);

}  // namespace kiln
