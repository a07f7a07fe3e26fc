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
///
/// Time is counted in trials, not rounds: every slope below is "seconds of weighted latency per
/// measured program". With equal-sized rounds (the search's 64 per round) this ranks tasks exactly
/// as Ansor's round-counted formulas do (every term is divided by the same round size), and it stays
/// right when rounds differ: a short round near exhaustion, or a resumed task whose whole history
/// arrives as one round of many trials (Ansor instead estimates rounds as trials / round size).
///
/// For a live task i with weight w, best cost c, trials t, FLOPs C:
///   chain    = w                                   (∂ objective / ∂ c)
///   backward = (c now − c W rounds ago) / (trials spent in those W rounds); 0 until W+1 rounds
///   forward  = min(−c / t, (β·C / V_max − c) / n)  n = trials of the task's last round (the size of
///              a round); V_max = best throughput C_k / c_k among tasks similar to i, i included
///   grad     = chain × (α·backward + (1 − α)·forward)
/// The forward term follows Ansor (paper §6 and its code): a round may take the task to within a
/// factor β of its group's best throughput, or gain as much per trial as its trials so far did on
/// average from nothing, whichever is more optimistic. The most negative grad gets the round; ties
/// go to the lowest index. Similar = same `kind` and equal floor(log2 FLOPs); tasks with no kind or
/// no FLOPs have no group. As in Ansor, a task that has had more than 5 rounds beyond every other
/// member of its group and still runs below V_max / β leaves the group: it is not similar after all.
#pragma once
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace kiln::search {

/// What the scheduler needs to know about one task: it never sees the DAG, only how much the task
/// counts (weight), how big it is (flops) and which tasks it resembles (kind).
struct SchedulerTask {
  std::string key;
  double weight = 1;   ///< occurrences in the model(s): how often its latency counts
  double flops = 0;    ///< per occurrence
  std::string kind;    ///< the anchor op kind ("Conv", "MatMul"): similarity groups
  /// The task's roofline: the least time the device can take for it (its FLOPs at the peak, or its
  /// inputs' and outputs' bytes at the memory bandwidth, whichever is longer); 0 when unknown.
  double roofline_s = 0;
};

/// The strategy and Ansor's constants (DESIGN.md §4); the defaults are the ones the tuner uses.
struct TaskSchedulerOptions {
  enum class Strategy { Gradient, RoundRobin };
  Strategy strategy = Strategy::Gradient;
  double alpha = 0.2;
  double beta = 2;
  int backward_window = 3;
  int early_stopping = -1;  ///< trials without improvement before a task (or the whole tuning) stops; <0 never
  /// A task whose best reaches this fraction of its roofline (roofline_s / best) stops: what is left to
  /// gain there is smaller than elsewhere ("near its roofline").
  double roofline_fraction = 0.9;
};

/// One task's progress, in trials and seconds. The scheduler keeps it; callers read it for display
/// and tests.
struct TaskProgress {
  int rounds = 0;
  int trials = 0;
  double best_cost = std::numeric_limits<double>::infinity();
  int best_trial = 0;                 ///< trial count when best_cost was reached
  std::vector<double> best_history;   ///< best_cost after each round
  std::vector<int> trials_history;    ///< trials after each round (the backward slope's denominator)
  bool dead = false;
  std::string why_dead;               ///< "no valid program", "exhausted", "no progress", "near its roofline (92%)"
};

/// Decides which task is tuned next and keeps each task's progress. It does no measuring itself: the
/// tuner asks next_task(), runs a round of that task's search and reports the outcome. Deterministic:
/// the same reports give the same choices.
class TaskScheduler {
 public:
  /// Throws kiln::Error for no tasks, a non-positive or non-finite weight, negative FLOPs, alpha
  /// outside [0, 1], a non-positive beta or backward window.
  TaskScheduler(std::vector<SchedulerTask> tasks, TaskSchedulerOptions options);

  /// The task for the next round, or -1 when every task is dead or tuning should stop early. Warm-up
  /// first: every live task without a round yet, in order (tasks restored from records skip it). The
  /// choice depends only on the reports so far; calling it twice without a report gives the same task
  /// under the gradient strategy (round-robin moves on).
  int next_task();

  /// The outcome of a round of `task`: `trials` programs measured, the task's best cost so far
  /// (infinity when none valid) and whether its search is exhausted. Resume replays records through
  /// this as one round per task. A task's first round without a valid program kills it ("no valid
  /// program"), as do exhaustion ("exhausted"), `early_stopping` of its own trials without a better
  /// cost ("no progress") and a best within roofline_fraction of its roofline ("near its roofline"). Throws kiln::Error for an unknown task, negative trials, a NaN cost or a
  /// cost above the task's earlier best (the caller's bookkeeping is wrong).
  void report(int task, int trials, double best_cost, bool exhausted);

  /// Σ weight × best cost over tasks with a valid program; infinity while any live task has none.
  /// Dead tasks without a program are left out: they will never have one, and an objective stuck at
  /// infinity would hide every later improvement (and disable global early stopping). Their latency
  /// is then the default schedule's, which the caller reports apart.
  double objective() const;
  /// The same sum with each task's best cost taken from `best_of(task)` (the tuner's re-measured
  /// finalists), the dead tasks as above.
  double objective(const std::function<double(int)>& best_of) const;

  /// Task `task`'s gradient as defined above (negative: tuning it lowers the objective); 0 for a
  /// dead task or one not yet warmed up. Exposed for the progress display and for tests.
  double gradient(int task) const;
  int total_trials() const { return total_trials_; }
  const std::vector<SchedulerTask>& tasks() const { return tasks_; }
  const TaskProgress& progress(int task) const { return progress_[task]; }

 private:
  std::vector<SchedulerTask> tasks_;
  TaskSchedulerOptions options_;
  std::vector<TaskProgress> progress_;
  int total_trials_ = 0;
  std::vector<int> group_;  ///< similarity group per task, -1 for none
  double best_objective_ = std::numeric_limits<double>::infinity();
  int best_objective_trial_ = 0;
  size_t next_round_robin_ = 0;

  int warmup_task() const;
  int gradient_task() const;
  int round_robin_task();
  bool stopped_early() const;
  double best_similar_throughput(int task) const;
  void maybe_leave_group(int task);
};

}  // namespace kiln::search
