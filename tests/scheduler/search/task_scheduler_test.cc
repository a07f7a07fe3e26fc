// The task scheduler on simulated tasks: each task's best cost after its r-th round is a fixed
// synthetic curve, so every test is exact and fast. Warm-up order, how the gradient strategy divides
// rounds (weight, stalled tasks, similar tasks), dead tasks, early stopping, round-robin, the
// objective, determinism, error messages, and a 5-task model on which gradient beats round-robin.
#include "scheduler/search/task_scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "frontend/ir/error.h"

namespace kiln::search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kRoundSize = 64;

using Strategy = TaskSchedulerOptions::Strategy;

// One simulated task: its scheduler description, its best cost after round r (0-based) and the round
// after which its search is exhausted (-1: never).
struct SimTask {
  SchedulerTask task;
  std::function<double(int)> best_after_round;
  int exhausted_after_round = -1;
};

// Best cost falling from `start` towards `floor` with a time constant of `tau` rounds: the usual
// shape of a tuning curve.
std::function<double(int)> decaying(double start, double floor, double tau) {
  return [=](int round) { return floor + (start - floor) * std::exp(-round / tau); };
}

std::function<double(int)> flat(double cost) {
  return [=](int) { return cost; };
}

SchedulerTask task(std::string key, double weight, double flops, std::string kind) {
  return SchedulerTask{std::move(key), weight, flops, std::move(kind)};
}

std::vector<SchedulerTask> scheduler_tasks(const std::vector<SimTask>& sims) {
  std::vector<SchedulerTask> tasks;
  for (const SimTask& s : sims) tasks.push_back(s.task);
  return tasks;
}

// Runs rounds until next_task() says stop or `trial_budget` trials are spent; returns the tasks
// picked, in order.
std::vector<int> simulate(TaskScheduler& scheduler, const std::vector<SimTask>& sims, int trial_budget) {
  std::vector<int> picks;
  while (scheduler.total_trials() < trial_budget) {
    const int t = scheduler.next_task();
    if (t < 0) break;
    picks.push_back(t);
    const int round = scheduler.progress(t).rounds;
    const double cost = std::min(scheduler.progress(t).best_cost, sims[t].best_after_round(round));
    const bool exhausted = sims[t].exhausted_after_round >= 0 && round >= sims[t].exhausted_after_round;
    scheduler.report(t, kRoundSize, cost, exhausted);
  }
  return picks;
}

TaskSchedulerOptions with(Strategy strategy, int early_stopping = -1) {
  TaskSchedulerOptions o;
  o.strategy = strategy;
  o.early_stopping = early_stopping;
  return o;
}

TEST(TaskScheduler, WarmupVisitsEveryTaskOnceInOrder) {
  for (Strategy strategy : {Strategy::Gradient, Strategy::RoundRobin}) {
    // Task 3 is the heaviest and would win the gradient at once; warm-up still goes in order.
    std::vector<SimTask> sims = {{task("a", 1, 1e6, "Conv"), flat(1e-3)},
                                 {task("b", 1, 1e6, "MatMul"), flat(2e-3)},
                                 {task("c", 1, 1e6, "Pool"), flat(3e-3)},
                                 {task("d", 50, 1e6, "Add"), decaying(1e-2, 1e-3, 5)}};
    TaskScheduler scheduler(scheduler_tasks(sims), with(strategy));
    const std::vector<int> picks = simulate(scheduler, sims, 4 * kRoundSize);
    EXPECT_EQ(picks, (std::vector<int>{0, 1, 2, 3}));
    for (int t = 0; t < 4; ++t) EXPECT_EQ(scheduler.progress(t).rounds, 1);
  }
}

TEST(TaskScheduler, HeavyTaskGetsMoreRoundsThanLightOneWithTheSameCurve) {
  std::vector<SimTask> sims = {{task("light", 1, 1e9, "Conv"), decaying(1e-2, 1e-3, 6)},
                               {task("heavy", 10, 1e9, "MatMul"), decaying(1e-2, 1e-3, 6)}};
  TaskScheduler scheduler(scheduler_tasks(sims), with(Strategy::Gradient));
  simulate(scheduler, sims, 24 * kRoundSize);
  EXPECT_GT(scheduler.progress(1).rounds, 2 * scheduler.progress(0).rounds);
}

TEST(TaskScheduler, ImprovingTaskWinsOverStalledOneAtTheSameCost) {
  // Same cost, same trials: the forward estimates agree, and the recent slope (backward) decides.
  TaskScheduler scheduler({task("stalled", 1, 1e9, "Conv"), task("improving", 1, 1e9, "MatMul")},
                          with(Strategy::Gradient));
  for (double c : {4e-3, 4e-3, 4e-3, 4e-3}) scheduler.report(0, kRoundSize, c, false);
  for (double c : {8e-3, 6e-3, 5e-3, 4e-3}) scheduler.report(1, kRoundSize, c, false);
  EXPECT_LT(scheduler.gradient(1), scheduler.gradient(0));
  EXPECT_EQ(scheduler.next_task(), 1);
}

TEST(TaskScheduler, StalledTaskGetsFewerRoundsThanImprovingOne) {
  // Ansor's forward term −c/t only fades as 1/t, so without early stopping a flat task still gets
  // rounds; what ends a stalled task is per-task early stopping, as in the tuner's normal use.
  std::vector<SimTask> sims = {{task("stalled", 1, 1e9, "Conv"), flat(5e-3)},
                               {task("improving", 1, 1e9, "MatMul"), decaying(5e-3, 5e-4, 20)}};
  TaskScheduler scheduler(scheduler_tasks(sims), with(Strategy::Gradient, 3 * kRoundSize));
  simulate(scheduler, sims, 24 * kRoundSize);
  EXPECT_EQ(scheduler.progress(0).why_dead, "no progress");
  EXPECT_EQ(scheduler.progress(0).rounds, 4);
  EXPECT_EQ(scheduler.progress(1).rounds, 20);
}

TEST(TaskScheduler, TaskFarBelowSimilarTasksThroughputIsPreferred) {
  // Task 1 reaches a fifth of task 0's throughput after 5 flat rounds. When both are Conv of the same
  // size class (floor(log2 FLOPs) = 30), the forward estimate says task 1 can catch up within β; when
  // task 1 is of another kind, only its own fading average gain speaks for it.
  auto gradient_of_slow_task = [](const std::string& kind) {
    TaskScheduler scheduler({task("fast", 1, 1.2e9, "Conv"), task("slow", 1, 1.5e9, kind)},
                            with(Strategy::Gradient));
    scheduler.report(0, kRoundSize, 1.2e-3, false);  // 1e12 FLOP/s
    for (int round = 0; round < 5; ++round) scheduler.report(1, kRoundSize, 7.5e-3, false);  // 2e11 FLOP/s
    return scheduler.gradient(1);
  };
  const double similar = gradient_of_slow_task("Conv");
  const double alone = gradient_of_slow_task("Pool");
  EXPECT_LT(similar, alone);
  // (β·C/V_max − c) / n over one round, weighted 1 − α; the backward slope of a flat curve is 0.
  EXPECT_DOUBLE_EQ(similar, 0.8 * (2 * 1.5e-3 - 7.5e-3) / kRoundSize);
  // Alone: −c/t, the task's own average gain per trial.
  EXPECT_DOUBLE_EQ(alone, 0.8 * (-7.5e-3 / (5 * kRoundSize)));
}

TEST(TaskScheduler, TaskThatNeverCatchesUpLeavesItsSimilarityGroup) {
  TaskScheduler scheduler({task("fast", 1, 1.2e9, "Conv"), task("slow", 1, 1.5e9, "Conv")}, with(Strategy::Gradient));
  scheduler.report(0, kRoundSize, 1.2e-3, false);  // 1e12 FLOP/s, one round
  for (int round = 0; round < 6; ++round) scheduler.report(1, kRoundSize, 7.5e-3, false);  // 2e11 FLOP/s
  EXPECT_DOUBLE_EQ(scheduler.gradient(1), 0.8 * (2 * 1.5e-3 - 7.5e-3) / kRoundSize);
  // Round 7 is more than 5 rounds beyond the other member's 1, still below 1e12 / β: not similar.
  scheduler.report(1, kRoundSize, 7.5e-3, false);
  EXPECT_DOUBLE_EQ(scheduler.gradient(1), 0.8 * (-7.5e-3 / (7 * kRoundSize)));
}

TEST(TaskScheduler, BackwardSlopeIsPerTrialOverTheWindow) {
  TaskScheduler scheduler({task("a", 2, 0, "")}, with(Strategy::Gradient));
  const std::vector<double> costs = {8e-3, 6e-3, 5e-3, 4e-3};
  for (double c : costs) scheduler.report(0, kRoundSize, c, false);
  // backward = (4e-3 − 8e-3) / (3 rounds × 64 trials); forward = −4e-3 / 256 trials.
  const double backward = (4e-3 - 8e-3) / (3 * kRoundSize);
  const double forward = -4e-3 / (4 * kRoundSize);
  EXPECT_DOUBLE_EQ(scheduler.gradient(0), 2 * (0.2 * backward + 0.8 * forward));
}

TEST(TaskScheduler, EqualGradientsGoToTheLowestIndex) {
  std::vector<SimTask> sims = {{task("a", 1, 1e6, "Conv"), flat(1e-3)},
                               {task("b", 1, 1e6, "Conv"), flat(1e-3)},
                               {task("c", 1, 1e6, "Conv"), flat(1e-3)}};
  TaskScheduler scheduler(scheduler_tasks(sims), with(Strategy::Gradient));
  simulate(scheduler, sims, 3 * kRoundSize);
  EXPECT_EQ(scheduler.next_task(), 0);
}

TEST(TaskScheduler, TaskWithoutValidProgramAfterWarmupIsDead) {
  std::vector<SimTask> sims = {{task("ok", 1, 1e6, "Conv"), decaying(2e-3, 1e-3, 3)},
                               {task("broken", 5, 1e6, "MatMul"), flat(kInf)}};
  for (Strategy strategy : {Strategy::Gradient, Strategy::RoundRobin}) {
    TaskScheduler scheduler(scheduler_tasks(sims), with(strategy));
    const std::vector<int> picks = simulate(scheduler, sims, 10 * kRoundSize);
    EXPECT_TRUE(scheduler.progress(1).dead);
    EXPECT_EQ(scheduler.progress(1).why_dead, "no valid program");
    EXPECT_EQ(scheduler.progress(1).rounds, 1);
    EXPECT_EQ(std::count(picks.begin(), picks.end(), 1), 1);
    EXPECT_FALSE(scheduler.progress(0).dead);
  }
}

TEST(TaskScheduler, ExhaustedTaskIsDead) {
  std::vector<SimTask> sims = {{task("small", 10, 1e6, "Conv"), decaying(2e-3, 1e-3, 3), 2},
                               {task("big", 1, 1e6, "MatMul"), decaying(2e-3, 1e-3, 3)}};
  TaskScheduler scheduler(scheduler_tasks(sims), with(Strategy::Gradient));
  const std::vector<int> picks = simulate(scheduler, sims, 12 * kRoundSize);
  EXPECT_TRUE(scheduler.progress(0).dead);
  EXPECT_EQ(scheduler.progress(0).why_dead, "exhausted");
  EXPECT_EQ(scheduler.progress(0).rounds, 3);  // rounds 0, 1, 2; exhausted after round 2
  EXPECT_EQ(std::count(picks.begin(), picks.end(), 0), 3);
  EXPECT_EQ(scheduler.total_trials(), 12 * kRoundSize);  // the rest went to task 1
}

// A task whose best comes within 90% of its roofline stops, saying how near it got; one without a
// roofline, or still far from it, goes on.
TEST(TaskScheduler, TaskNearItsRooflineStops) {
  SchedulerTask near = task("near", 1, 1e6, "Conv"), far = task("far", 1, 1e6, "MatMul");
  near.roofline_s = 0.95e-3;  // the curve reaches 1.0 ms: 95% of the roofline
  far.roofline_s = 0.5e-3;
  std::vector<SimTask> sims = {{near, decaying(2e-3, 1e-3, 1)}, {far, decaying(2e-3, 1e-3, 1)},
                               {task("unknown", 1, 1e6, "Add"), decaying(2e-3, 1e-3, 1)}};
  TaskScheduler scheduler(scheduler_tasks(sims), with(Strategy::RoundRobin));
  simulate(scheduler, sims, 30 * kRoundSize);
  EXPECT_TRUE(scheduler.progress(0).dead);
  EXPECT_EQ(scheduler.progress(0).why_dead.rfind("near its roofline (9", 0), 0u) << scheduler.progress(0).why_dead;
  EXPECT_FALSE(scheduler.progress(1).dead);
  EXPECT_FALSE(scheduler.progress(2).dead);
  EXPECT_LT(scheduler.progress(0).trials, scheduler.progress(1).trials);
}

TEST(TaskScheduler, EveryTaskDeadStopsTuning) {
  std::vector<SimTask> sims = {{task("a", 1, 1e6, "Conv"), flat(1e-3), 1}, {task("b", 1, 1e6, "Add"), flat(kInf)}};
  for (Strategy strategy : {Strategy::Gradient, Strategy::RoundRobin}) {
    TaskScheduler scheduler(scheduler_tasks(sims), with(strategy));
    EXPECT_EQ(simulate(scheduler, sims, 100 * kRoundSize), (std::vector<int>{0, 1, 0}));
    EXPECT_EQ(scheduler.next_task(), -1);
  }
}

TEST(TaskScheduler, TaskWithoutProgressForEarlyStoppingTrialsIsDead) {
  std::vector<SimTask> sims = {{task("stalled", 1, 1e6, "Conv"), flat(1e-3)},
                               {task("improving", 1, 1e6, "MatMul"), decaying(1e-3, 1e-5, 1e9)}};
  TaskScheduler scheduler(scheduler_tasks(sims), with(Strategy::RoundRobin, 2 * kRoundSize));
  simulate(scheduler, sims, 20 * kRoundSize);
  // Best at trial 64 (warm-up); dead once its own trials reach 64 + 128.
  EXPECT_TRUE(scheduler.progress(0).dead);
  EXPECT_EQ(scheduler.progress(0).why_dead, "no progress");
  EXPECT_EQ(scheduler.progress(0).trials, 3 * kRoundSize);
  EXPECT_FALSE(scheduler.progress(1).dead);
  EXPECT_EQ(scheduler.total_trials(), 20 * kRoundSize);
}

TEST(TaskScheduler, TuningStopsWhenTheObjectiveStallsForEarlyStoppingTrials) {
  std::vector<SimTask> sims = {{task("a", 1, 1e6, "Conv"), flat(1e-3)}, {task("b", 1, 1e6, "MatMul"), flat(2e-3)}};
  TaskScheduler scheduler(scheduler_tasks(sims), with(Strategy::RoundRobin, 4 * kRoundSize));
  const std::vector<int> picks = simulate(scheduler, sims, 100 * kRoundSize);
  // The objective last improved at the end of warm-up (128 trials); 4 rounds later tuning stops while
  // each task has only 3 × 64 trials since its own best, so neither is dead.
  EXPECT_EQ(picks, (std::vector<int>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(scheduler.next_task(), -1);
  EXPECT_FALSE(scheduler.progress(0).dead);
  EXPECT_FALSE(scheduler.progress(1).dead);
}

TEST(TaskScheduler, ImprovingObjectiveKeepsTuningGoing) {
  std::vector<SimTask> sims = {{task("a", 1, 1e6, "Conv"), decaying(1e-3, 1e-5, 1e9)}};
  TaskScheduler scheduler(scheduler_tasks(sims), with(Strategy::Gradient, kRoundSize));
  simulate(scheduler, sims, 30 * kRoundSize);
  EXPECT_EQ(scheduler.total_trials(), 30 * kRoundSize);
  EXPECT_NE(scheduler.next_task(), -1);
}

TEST(TaskScheduler, RoundRobinCyclesAndSkipsDeadTasks) {
  std::vector<SimTask> sims = {{task("a", 1, 1e6, "Conv"), decaying(1e-3, 1e-4, 5)},
                               {task("b", 100, 1e6, "Conv"), decaying(1e-3, 1e-4, 5), 1},
                               {task("c", 1, 1e6, "Conv"), decaying(1e-3, 1e-4, 5)}};
  TaskScheduler scheduler(scheduler_tasks(sims), with(Strategy::RoundRobin));
  EXPECT_EQ(simulate(scheduler, sims, 10 * kRoundSize), (std::vector<int>{0, 1, 2, 0, 1, 2, 0, 2, 0, 2}));
  EXPECT_EQ(scheduler.progress(1).why_dead, "exhausted");
}

TEST(TaskScheduler, ObjectiveIsWeightedSumOfBestCosts) {
  TaskScheduler scheduler({task("a", 2, 1e6, "Conv"), task("b", 3, 1e6, "MatMul"), task("c", 4, 1e6, "Add")},
                          with(Strategy::Gradient));
  EXPECT_EQ(scheduler.objective(), kInf);
  scheduler.report(0, kRoundSize, 1e-3, false);
  EXPECT_EQ(scheduler.objective(), kInf);  // b and c are live without a program
  scheduler.report(1, kRoundSize, 2e-3, false);
  scheduler.report(2, kRoundSize, kInf, false);  // c dies: left out of the objective
  EXPECT_TRUE(scheduler.progress(2).dead);
  EXPECT_DOUBLE_EQ(scheduler.objective(), 2 * 1e-3 + 3 * 2e-3);
  scheduler.report(1, kRoundSize, 1e-3, false);
  EXPECT_DOUBLE_EQ(scheduler.objective(), 2 * 1e-3 + 3 * 1e-3);
  EXPECT_EQ(scheduler.total_trials(), 4 * kRoundSize);
  EXPECT_EQ(scheduler.progress(1).best_history, (std::vector<double>{2e-3, 1e-3}));
  EXPECT_EQ(scheduler.progress(1).trials_history, (std::vector<int>{kRoundSize, 2 * kRoundSize}));
  EXPECT_EQ(scheduler.progress(1).best_trial, 2 * kRoundSize);
}

TEST(TaskScheduler, ResumedTasksSkipWarmup) {
  TaskScheduler scheduler({task("a", 1, 1e6, "Conv"), task("b", 1, 1e6, "MatMul"), task("c", 1, 1e6, "Add")},
                          with(Strategy::Gradient));
  scheduler.report(1, 640, 1e-3, false);  // records of task b replayed as one round
  EXPECT_EQ(scheduler.next_task(), 0);
  scheduler.report(0, kRoundSize, 1e-3, false);
  EXPECT_EQ(scheduler.next_task(), 2);
}

// A model of five tasks: two big similar convolutions (one used six times; floor(log2 FLOPs) = 30 for
// both), a matmul, a cheap but frequent elementwise task that is tuned after one round, and a pooling
// task. Gradient spends the budget where the weighted latency falls; round-robin spends a fifth of it
// on each, whatever it buys. After 30 rounds: gradient about 39 ms, round-robin about 84 ms.
std::vector<SimTask> five_task_model() {
  return {{task("conv_a", 6, 2e9, "Conv"), decaying(2e-2, 2e-3, 8)},
          {task("conv_b", 1, 2.1e9, "Conv"), decaying(2.1e-2, 2.1e-3, 8)},
          {task("matmul", 2, 1e8, "MatMul"), decaying(2e-3, 5e-4, 3)},
          {task("add", 10, 1e6, "Add"), decaying(5e-5, 4e-5, 1)},
          {task("pool", 1, 1e7, "Pool"), decaying(5e-4, 2e-4, 2)}};
}

TEST(TaskScheduler, GradientBeatsRoundRobinOnAFiveTaskModel) {
  const std::vector<SimTask> sims = five_task_model();
  const int budget = 30 * kRoundSize;
  TaskScheduler gradient(scheduler_tasks(sims), with(Strategy::Gradient));
  TaskScheduler round_robin(scheduler_tasks(sims), with(Strategy::RoundRobin));
  simulate(gradient, sims, budget);
  simulate(round_robin, sims, budget);
  ASSERT_EQ(gradient.total_trials(), budget);
  ASSERT_EQ(round_robin.total_trials(), budget);
  RecordProperty("gradient_objective_ms", std::to_string(gradient.objective() * 1e3));
  RecordProperty("round_robin_objective_ms", std::to_string(round_robin.objective() * 1e3));
  EXPECT_LT(gradient.objective(), 0.9 * round_robin.objective());
  EXPECT_GT(gradient.progress(0).rounds, round_robin.progress(0).rounds);
}

TEST(TaskScheduler, SameReportsGiveTheSameChoices) {
  const std::vector<SimTask> sims = five_task_model();
  TaskScheduler first(scheduler_tasks(sims), with(Strategy::Gradient, 10 * kRoundSize));
  TaskScheduler second(scheduler_tasks(sims), with(Strategy::Gradient, 10 * kRoundSize));
  const std::vector<int> a = simulate(first, sims, 40 * kRoundSize);
  const std::vector<int> b = simulate(second, sims, 40 * kRoundSize);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 40u);
}

TEST(TaskScheduler, BadInputIsRejectedWithAMessage) {
  const TaskSchedulerOptions options;
  EXPECT_THROW(TaskScheduler({}, options), Error);
  EXPECT_THROW(TaskScheduler({task("a", 0, 1e6, "Conv")}, options), Error);
  EXPECT_THROW(TaskScheduler({task("a", 1, -1, "Conv")}, options), Error);
  TaskSchedulerOptions bad_alpha;
  bad_alpha.alpha = 1.5;
  EXPECT_THROW(TaskScheduler({task("a", 1, 1e6, "Conv")}, bad_alpha), Error);
  TaskSchedulerOptions bad_window;
  bad_window.backward_window = 0;
  EXPECT_THROW(TaskScheduler({task("a", 1, 1e6, "Conv")}, bad_window), Error);

  TaskScheduler scheduler({task("conv1", 1, 1e6, "Conv")}, options);
  EXPECT_THROW(scheduler.report(1, kRoundSize, 1e-3, false), Error);
  EXPECT_THROW(scheduler.report(0, -1, 1e-3, false), Error);
  EXPECT_THROW(scheduler.report(0, kRoundSize, std::nan(""), false), Error);
  scheduler.report(0, kRoundSize, 1e-3, false);
  try {
    scheduler.report(0, kRoundSize, 2e-3, false);
    FAIL() << "a worse best cost was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("task 0 (conv1)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::search
