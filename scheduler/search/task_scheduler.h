/// \file The task scheduler: which task gets the next round of measurements, so that the model's
/// end-to-end latency falls fastest (Ansor §6).
///
/// The objective is Σ weight × best latency over tasks. After a warm-up round for every task, the
/// gradient strategy picks the task whose next round is expected to reduce the objective most: a mix
/// (α) of the recent slope of its best latency (over a backward window of rounds) and an optimistic
/// forward estimate from its own progress and from similar tasks (same op kind, similar log FLOPs),
/// capped by β. Round-robin is the simple alternative. Tasks with no valid program after warm-up, whose
/// search is exhausted, or without improvement for `early_stopping` trials are dead; tuning stops early
/// when the objective has not improved for `early_stopping` trials.
#pragma once
#include <limits>
#include <string>
#include <vector>

namespace kiln::search {

struct SchedulerTask {
  std::string key;
  double weight = 1;   ///< occurrences in the model(s): how often its latency counts
  double flops = 0;    ///< per occurrence
  std::string kind;    ///< the anchor op kind ("Conv", "MatMul"): similarity groups
};

struct TaskSchedulerOptions {
  enum class Strategy { Gradient, RoundRobin };
  Strategy strategy = Strategy::Gradient;
  double alpha = 0.2;
  double beta = 2;
  int backward_window = 3;
  int early_stopping = -1;  ///< trials without improvement before a task (or the whole tuning) stops; <0 never
};

/// One task's progress, in trials and seconds.
struct TaskProgress {
  int rounds = 0;
  int trials = 0;
  double best_cost = std::numeric_limits<double>::infinity();
  int best_trial = 0;                 ///< trial count when best_cost was reached
  std::vector<double> best_history;   ///< best_cost after each round
  bool dead = false;
  std::string why_dead;               ///< "no valid program", "exhausted", "no progress"
};

class TaskScheduler {
 public:
  TaskScheduler(std::vector<SchedulerTask> tasks, TaskSchedulerOptions options);

  /// The task for the next round, or -1 when every task is dead or tuning should stop early. Warm-up
  /// first: every task once, in order.
  int next_task();

  /// The outcome of a round of `task`: `trials` programs measured, the task's best cost so far
  /// (infinity when none valid) and whether its search is exhausted. Resume replays records through
  /// this as one round per task.
  void report(int task, int trials, double best_cost, bool exhausted);

  /// Σ weight × best cost over tasks with a valid program; infinity while any task has none.
  double objective() const;
  int total_trials() const { return total_trials_; }
  const std::vector<SchedulerTask>& tasks() const { return tasks_; }
  const TaskProgress& progress(int task) const { return progress_[task]; }

 private:
  std::vector<SchedulerTask> tasks_;
  TaskSchedulerOptions options_;
  std::vector<TaskProgress> progress_;
  int total_trials_ = 0;
  double best_objective_ = std::numeric_limits<double>::infinity();
  int best_objective_trial_ = 0;
  size_t next_warmup_ = 0;
  size_t next_round_robin_ = 0;
};

}  // namespace kiln::search
