/// \file The tuning loop: tasks, one search per task, one cost model, a task scheduler, a builder and a
/// runner, turned into measured programs round after round (Ansor's TaskScheduler.tune).
///
/// Each task's first round also measures kiln's default schedule (MeasureInput::default_schedule): a
/// task's best is the faster of it and the best searched program, so the estimate and the compiled
/// package never get worse than untuned. Each round the task scheduler picks a task, its search
/// proposes a batch, the batch is built and
/// measured, the results go to the search (never re-measured), the cost model (retrained) and the
/// caller (who appends them to the records before the next round: what is reported survives a kill).
/// Programs read back from records are restored the same way without measuring, so a resumed tuner
/// continues where the killed one stopped. The tuner depends only on the measurement interfaces
/// (scheduler/measure/), not on how or where programs are built and run.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/measure/measure.h"
#include "scheduler/measure/program_runner.h"
#include "scheduler/search/cost_model.h"
#include "scheduler/search/evolutionary_search.h"
#include "scheduler/search/task_scheduler.h"

namespace kiln::search {

/// A task to tune: its DAG and what the scheduler weighs it by.
struct TuneTask {
  std::string key;
  std::shared_ptr<const te::ComputeDAG> dag;
  double weight = 1;
  double flops = 0;
  std::string kind;   ///< anchor op ("Conv"): similarity groups
  std::string label;  ///< for people: "Conv conv1/Conv"
};

struct TunerOptions {
  int trials = 1000;               ///< measured programs in all, restored ones included
  int measures_per_round = 64;     ///< at most; see Tuner::round_size
  /// Measure the default schedule in every round of a task of 8 or more measures (one of them), not
  /// only in its first round.
  bool default_each_round = true;
  /// A round whose re-measured default schedule (the task's reference program) runs this much slower
  /// than its best time so far is noisy: the machine was loaded or throttled while the round ran.
  double noise_threshold = 1.10;
  /// The device's FMA peak (FLOP/s, all the threads the programs use) and memory bandwidth (bytes/s),
  /// when known (`kiln tune --peak-gflops --bandwidth-gbs`): each task's roofline follows from them
  /// (roofline_s), the progress shows how near each task is, and a task within the scheduler's
  /// roofline_fraction of it stops. 0: unknown.
  double peak_flops = 0;
  double bandwidth = 0;
  uint64_t seed = 0;
  /// How long the device may stay lost (MeasureError::DeviceLost for every program of a round) before
  /// tune() gives up with an Error; meanwhile it waits, device_first_wait_s at first and twice as long
  /// each time, up to 30 s, and tries again. The records stay resumable either way.
  double device_wait_s = 600;
  double device_first_wait_s = 1;
  /// Told each time a round lost its device, and what the tuner does about it ("kiln: note: ...").
  std::function<void(const std::string&)> on_note;
  sketch::SearchParams params;
  SearchOptions search;
  TaskSchedulerOptions scheduler;
};

/// One measured batch, as the caller sees it after the round.
struct RoundReport {
  int task = 0;
  std::vector<measure::MeasureInput> inputs;
  std::vector<measure::MeasureResult> results;
  /// The reference's time this round over its best before it (a round of remeasure_finalists: its
  /// slower pass over its faster); 0 when the round did not time the reference against an earlier time.
  double reference_drift = 0;
  bool noisy = false;      ///< reference_drift over TunerOptions::noise_threshold
  bool finalists = false;  ///< a batch of remeasure_finalists
  /// Per input, the feature rows the cost model learned from (none for the default schedule, a
  /// finalists' batch, or a program that does not lower): what a record database keeps.
  std::vector<ProgramFeatures> features;
};

/// One point of the tuning curve: after `trials` measurements the objective (Σ weight × best latency,
/// seconds; infinity while a task has no valid program).
struct CurvePoint {
  int trials = 0;
  double objective = 0;
  double elapsed_s = 0;
};

class Tuner {
 public:
  /// `tasks` must not be empty. Throws state::ScheduleError when a task has no sketch.
  Tuner(std::vector<TuneTask> tasks, TunerOptions options, CostModel& model, measure::Builder& builder,
        measure::ProgramRunner& runner);

  /// Adds a program measured earlier (read back from records) to task `task`; `default_schedule`: the
  /// record is the default schedule's time (`s` is then ignored). Call before tune().
  void restore(int task, const state::State& s, const measure::MeasureResult& r, bool default_schedule = false);

  /// Samples of other tasks (a record database: backends/measure/sample_database.h) that the cost
  /// model trains on before the first round and keeps for every later one, so a new model's first
  /// rounds are already guided. Not trials. Call before tune().
  void pretrain(std::vector<MeasuredSample> samples);

  /// Tunes until `trials` programs are measured (restored ones count), every task is dead, or tuning
  /// stops early. `on_round` runs after each measured batch, before the next round starts.
  void tune(const std::function<void(const RoundReport&)>& on_round);

  /// Times each task's `per_task` fastest programs again beside its default schedule, in two passes
  /// over one batch per task, so that they are compared at one moment rather than in rounds that ran
  /// under different loads (a tune beside the test suite once picked programs slower than untuned).
  /// Each candidate's result holds both passes' times; best_cost then follows these times. `on_batch`
  /// gets each task's batch (its records rank first: records.h, final_batch). Not trials: the budget
  /// is not charged.
  void remeasure_finalists(int per_task, const std::function<void(const RoundReport&)>& on_batch);
  /// Rounds so far whose reference ran over noise_threshold times its best (finalist batches included).
  int noisy_rounds() const { return noisy_rounds_; }

  const std::vector<TuneTask>& tasks() const { return tasks_; }
  const TaskSearch& search(int task) const { return *searches_[task]; }
  /// Seconds of the task's default schedule (infinity until measured, or when it failed).
  double default_cost(int task) const { return default_cost_[task]; }
  /// The faster of the default schedule and the best searched program; after remeasure_finalists, the
  /// fastest of the task's re-measured finalists.
  double best_cost(int task) const;
  const TaskScheduler& scheduler() const { return scheduler_; }
  /// The least time task `task` can take on the device (TunerOptions::peak_flops, bandwidth): its
  /// FLOPs at the peak or the bytes of its inputs, weights and outputs at the bandwidth, whichever is
  /// longer; 0 when neither is known.
  double roofline_s(int task) const { return roofline_[task]; }
  /// The estimated end-to-end latency: Σ weight × best_cost over the tasks (the scheduler's objective,
  /// but after remeasure_finalists from the re-measured times); infinity while a live task has none.
  double objective() const;
  const std::vector<CurvePoint>& curve() const { return curve_; }
  /// Programs measured (or restored) so far.
  int trials() const { return trials_; }
  /// Programs measured per round: measures_per_round, or fewer when the budget shared by every task
  /// is smaller (TVM's rule: min(per round, trials / tasks), at least 1), so the warm-up, one round
  /// per task, measures every task before any task gets a second round.
  int round_size() const;
  /// Whether the budget measures every task at least once (a round of 1 is the default schedule
  /// alone); tasks past it keep the default schedule untimed.
  bool budget_covers_every_task() const { return options_.trials >= static_cast<int>(tasks_.size()); }

 private:
  void finish_restore();
  // Takes the programs whose device was lost out of `report` (they are measured again in the task's
  // next round, once) and returns how many there were; a default schedule lost is simply due again.
  int take_out_lost(RoundReport& report, const std::vector<bool>& is_retry);
  // After a round that lost everything: waits for the device, or throws once device_wait_s is spent.
  void wait_for_device(const RoundReport& lost);
  // Runs a built batch a few candidates at a time, cutting off candidates far slower than the best.
  std::vector<measure::MeasureResult> run_in_chunks(std::vector<measure::MeasureInput>& inputs,
                                                    const std::vector<measure::BuildResult>& builds, double best);
  std::vector<TuneTask> tasks_;
  TunerOptions options_;
  CostModel& model_;
  measure::Builder& builder_;
  measure::ProgramRunner& runner_;
  std::vector<std::unique_ptr<TaskSearch>> searches_;
  TaskScheduler scheduler_;
  std::vector<std::vector<MeasuredSample>> restored_;  // per task, until tune() starts
  std::vector<MeasuredSample> pretrain_;               // until tune() starts
  std::vector<int> restored_trials_;
  std::vector<double> default_cost_;
  std::vector<bool> default_measured_;
  std::vector<CurvePoint> curve_;
  std::vector<double> roofline_;    // per task, roofline_s
  std::vector<double> final_cost_;  // per task: fastest re-measured finalist, NaN before remeasure_finalists
  int trials_ = 0;
  int noisy_rounds_ = 0;
  std::vector<std::vector<state::State>> lost_;  // per task: programs to measure again, lost once
  double waited_s_ = 0;                          // in the current outage; 0 once a round measures anything
  double next_wait_s_ = 0;                       // the next wait; device_first_wait_s after a measurement
  std::string last_lost_;                        // the last device error, for the note and the Error
};

/// Seconds of a result: the mean of its repeats; infinity for an error or no repeats.
double mean_cost(const measure::MeasureResult& r);

}  // namespace kiln::search
