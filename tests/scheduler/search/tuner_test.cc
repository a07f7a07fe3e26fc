// The tuning loop with a fake builder and runner (no compiler, no clock): it spends exactly its trial
// budget, reports every measured program once, never measures a program twice, splits trials between
// tasks, continues from restored programs as if never stopped, and a seed reproduces its candidates.
#include "scheduler/search/tuner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <string>

#include "tests/scheduler/state/state_test_util.h"

namespace kiln {
namespace {

using search::RoundReport;
using search::Tuner;
using search::TuneTask;

class FakeBuilder : public measure::Builder {
 public:
  std::vector<measure::BuildResult> build(const std::vector<measure::MeasureInput>& inputs) override {
    return std::vector<measure::BuildResult>(inputs.size());
  }
};

// A program's "time" is a hash of its loop nest: deterministic, different between programs, and one
// program in eight fails, as real candidates sometimes do.
class FakeRunner : public measure::ProgramRunner {
 public:
  std::vector<measure::MeasureResult> run(const std::vector<measure::MeasureInput>& inputs,
                                          const std::vector<measure::BuildResult>&) override {
    std::vector<measure::MeasureResult> out;
    for (const measure::MeasureInput& in : inputs) {
      const size_t h = std::hash<std::string>()(state::print_state(in.state));
      measure::MeasureResult r;
      if (h % 8 == 0) {
        r.error = measure::MeasureError::RuntimeDevice;
      } else {
        r.costs = {1e-3 * (1 + static_cast<double>(h % 1000) / 1000)};
      }
      out.push_back(r);
    }
    return out;
  }
};

std::vector<TuneTask> two_tasks() {
  return {{"matmul", state::testing::matmul_dag(), 2, 2.0 * 64 * 32 * 48, "MatMul", "MatMul a"},
          {"conv", state::testing::conv_dag(), 1, 1e6, "Conv", "Conv b"}};
}

search::TunerOptions small_options(int trials) {
  search::TunerOptions o;
  o.trials = trials;
  o.measures_per_round = 8;
  o.seed = 3;
  o.search.population = 48;
  o.search.generations = 2;
  o.search.init_min_population = 16;
  return o;
}

// Runs a tuner and returns the printed programs its searches proposed, in order, and how often the
// default schedule was measured.
struct TuneRun {
  std::vector<std::string> programs;
  std::vector<int> task_of;  // of every measured input, the default included
  int defaults = 0;
  int rounds = 0;
};

TuneRun tune(Tuner& tuner) {
  TuneRun run;
  tuner.tune([&](const RoundReport& r) {
    ++run.rounds;
    EXPECT_EQ(r.inputs.size(), r.results.size());
    for (const measure::MeasureInput& in : r.inputs) {
      run.task_of.push_back(r.task);
      if (in.default_schedule) ++run.defaults;
      else run.programs.push_back(state::print_state(in.state));
    }
  });
  return run;
}

TEST(Tuner, SpendsTheBudgetOnBothTasksAndNeverMeasuresTwice) {
  FakeBuilder builder;
  FakeRunner runner;
  auto model = search::make_random_model(1);
  Tuner tuner(two_tasks(), small_options(40), *model, builder, runner);
  const TuneRun run = tune(tuner);
  EXPECT_EQ(tuner.trials(), 40);
  EXPECT_EQ(run.programs.size() + static_cast<size_t>(run.defaults), 40u);
  EXPECT_EQ(run.defaults, run.rounds) << "the default schedule is measured once in every round";
  EXPECT_EQ(std::set<std::string>(run.programs.begin(), run.programs.end()).size(), run.programs.size());
  EXPECT_EQ(run.task_of[0], 0);  // warm-up in order
  EXPECT_EQ(run.task_of[8], 1);
  EXPECT_EQ(tuner.scheduler().progress(0).trials + tuner.scheduler().progress(1).trials, 40);
  // The curve starts before any measurement and ends at the budget with a finite estimate.
  ASSERT_GE(tuner.curve().size(), 2u);
  EXPECT_EQ(tuner.curve().front().trials, 0);
  EXPECT_EQ(tuner.curve().back().trials, 40);
  EXPECT_TRUE(std::isfinite(tuner.curve().back().objective));
  for (int t = 0; t < 2; ++t) {
    EXPECT_TRUE(std::isfinite(tuner.search(t).best_cost()));
    EXPECT_TRUE(tuner.search(t).best_state().has_value());
  }
}

// A budget smaller than tasks x measures_per_round still measures every task: rounds shrink to
// trials / tasks (at least 1), and the warm-up gives each task one (found on a 61-task model, where
// rounds of 64 spent a budget of 16 per task on the first 15 tasks).
TEST(Tuner, RoundsShrinkSoTheWarmUpMeasuresEveryTask) {
  std::vector<TuneTask> tasks;
  for (const char* key : {"a", "b", "c", "d", "e", "f"})
    tasks.push_back({key, state::testing::matmul_dag(), 1, 2.0 * 64 * 32 * 48, "MatMul", key});
  FakeBuilder builder;
  FakeRunner runner;
  auto model = search::make_random_model(1);
  search::TunerOptions o = small_options(12);
  o.measures_per_round = 64;
  Tuner tuner(tasks, o, *model, builder, runner);
  EXPECT_EQ(tuner.round_size(), 2);
  EXPECT_TRUE(tuner.budget_covers_every_task());
  const TuneRun run = tune(tuner);
  EXPECT_EQ(tuner.trials(), 12);
  ASSERT_EQ(run.task_of.size(), 12u);
  for (int t = 0; t < 6; ++t) {
    EXPECT_EQ(run.task_of[2 * t], t) << "warm-up round of task " << t;
    EXPECT_EQ(tuner.scheduler().progress(t).trials, 2) << "task " << t;
    EXPECT_TRUE(std::isfinite(tuner.best_cost(t))) << "task " << t;
  }

  // Fewer trials than tasks: rounds of 1 (the default schedule), and the tuner says the budget falls short.
  Tuner short_budget(tasks, small_options(4), *model, builder, runner);
  EXPECT_EQ(short_budget.round_size(), 1);
  EXPECT_FALSE(short_budget.budget_covers_every_task());
  const TuneRun few = tune(short_budget);
  EXPECT_EQ(few.task_of, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(few.defaults, 4);
}

TEST(Tuner, SameSeedSameCandidatesAndAnotherSeedOthers) {
  FakeBuilder builder;
  FakeRunner runner;
  auto m1 = search::make_random_model(1), m2 = search::make_random_model(1), m3 = search::make_random_model(1);
  Tuner a(two_tasks(), small_options(24), *m1, builder, runner);
  Tuner b(two_tasks(), small_options(24), *m2, builder, runner);
  search::TunerOptions other = small_options(24);
  other.seed = 4;
  Tuner c(two_tasks(), other, *m3, builder, runner);
  const TuneRun ra = tune(a), rb = tune(b), rc = tune(c);
  EXPECT_EQ(ra.programs, rb.programs);
  EXPECT_NE(ra.programs, rc.programs);
}

// What `kiln tune` does on resume: the measured programs come back through restore(), count towards
// the budget, are never proposed again, and warm-up skips tasks that already have programs.
TEST(Tuner, RestoredProgramsCountAndAreNotMeasuredAgain) {
  FakeBuilder builder;
  FakeRunner runner;
  auto m1 = search::make_random_model(1);
  Tuner first(two_tasks(), small_options(16), *m1, builder, runner);
  std::vector<std::pair<int, measure::MeasureInput>> measured;
  std::vector<measure::MeasureResult> results;
  first.tune([&](const RoundReport& r) {
    for (size_t i = 0; i < r.inputs.size(); ++i) {
      measured.push_back({r.task, r.inputs[i]});
      results.push_back(r.results[i]);
    }
  });
  ASSERT_EQ(measured.size(), 16u);

  auto m2 = search::make_random_model(1);
  Tuner resumed(two_tasks(), small_options(40), *m2, builder, runner);
  for (size_t i = 0; i < measured.size(); ++i)
    resumed.restore(measured[i].first, measured[i].second.state, results[i], measured[i].second.default_schedule);
  EXPECT_EQ(resumed.trials(), 16);
  const TuneRun run = tune(resumed);
  EXPECT_EQ(resumed.trials(), 40);
  EXPECT_EQ(run.programs.size() + static_cast<size_t>(run.defaults), 24u);
  std::set<std::string> before;
  for (const auto& [task, in] : measured)
    if (!in.default_schedule) before.insert(state::print_state(in.state));
  for (const std::string& p : run.programs) EXPECT_EQ(before.count(p), 0u) << "measured again:\n" << p;
  EXPECT_EQ(resumed.search(0).best_cost(), std::min(resumed.search(0).best_cost(), first.search(0).best_cost()));
}

// The runner gets each batch 2 at a time until a time is known, then 8 at a time; candidates then
// carry a cutoff of 20x the best so far (at least 50 ms), so hopeless programs cost one call.
TEST(Tuner, CandidatesCarryACutoffFromTheBestTimeSoFar) {
  FakeBuilder builder;
  class Recording : public FakeRunner {
   public:
    std::vector<std::pair<size_t, double>> calls;  // batch size, first input's cutoff
    std::vector<measure::MeasureResult> run(const std::vector<measure::MeasureInput>& in,
                                            const std::vector<measure::BuildResult>& b) override {
      calls.push_back({in.size(), in.front().slow_call_s});
      auto out = FakeRunner::run(in, b);
      for (auto& r : out) r.error = measure::MeasureError::None, r.costs = {0.01};  // 10 ms each
      return out;
    }
  } runner;
  auto model = search::make_random_model(1);
  search::TunerOptions o = small_options(16);
  o.measures_per_round = 16;
  Tuner tuner({two_tasks()[0]}, o, *model, builder, runner);
  tune(tuner);
  ASSERT_EQ(runner.calls.size(), 3u);  // 2 + 8 + 6
  EXPECT_EQ(runner.calls[0].first, 2u);
  EXPECT_EQ(runner.calls[1].first, 8u);
  EXPECT_EQ(runner.calls[0].second, 0);       // nothing known yet: no cutoff
  EXPECT_DOUBLE_EQ(runner.calls[1].second, 0.2);  // 20 x 10 ms
}

TEST(Tuner, RunnerFailuresAreMeasurementsWithoutATime) {
  FakeBuilder builder;
  class Failing : public measure::ProgramRunner {
   public:
    std::vector<measure::MeasureResult> run(const std::vector<measure::MeasureInput>& in,
                                            const std::vector<measure::BuildResult>&) override {
      std::vector<measure::MeasureResult> out(in.size());
      for (auto& r : out) r.error = measure::MeasureError::WrongAnswer;
      return out;
    }
  } runner;
  auto model = search::make_random_model(1);
  Tuner tuner({two_tasks()[0]}, small_options(16), *model, builder, runner);
  const TuneRun run = tune(tuner);
  // The task has no valid program after its warm-up round: the scheduler gives up on it.
  EXPECT_EQ(run.programs.size() + static_cast<size_t>(run.defaults), 8u);
  EXPECT_EQ(run.defaults, 1);
  EXPECT_TRUE(tuner.scheduler().progress(0).dead);
  EXPECT_FALSE(std::isfinite(tuner.search(0).best_cost()));
}

// FakeRunner's times scaled by `load`: a machine that other work slows down.
class LoadedRunner : public FakeRunner {
 public:
  double load = 1;
  int batches = 0;
  std::vector<measure::MeasureResult> run(const std::vector<measure::MeasureInput>& inputs,
                                          const std::vector<measure::BuildResult>& builds) override {
    ++batches;
    std::vector<measure::MeasureResult> out = FakeRunner::run(inputs, builds);
    for (measure::MeasureResult& r : out)
      for (double& c : r.costs) c *= load;
    return out;
  }
};

// A round whose reference (the task's default schedule, timed again each round of 8) runs over 1.1x
// its best time is reported noisy; rounds on a steady machine are not.
TEST(Tuner, RoundsOnALoadedMachineAreReportedNoisy) {
  FakeBuilder builder;
  LoadedRunner runner;
  auto model = search::make_random_model(1);
  Tuner tuner({two_tasks()[0]}, small_options(48), *model, builder, runner);
  int rounds = 0, noisy = 0;
  tuner.tune([&](const RoundReport& r) {
    ++rounds;
    noisy += r.noisy;
    if (rounds == 1) {
      EXPECT_EQ(r.reference_drift, 0) << "the first round has no earlier time to compare with";
    } else {
      EXPECT_GT(r.reference_drift, 0);
    }
    EXPECT_EQ(r.noisy, rounds >= 3) << "round " << rounds << ": drift " << r.reference_drift;
    if (rounds == 2) runner.load = 1.5;  // from the third round on
  });
  EXPECT_EQ(rounds, 6);
  EXPECT_EQ(noisy, 4);
  EXPECT_EQ(tuner.noisy_rounds(), 4);
}

// After tuning, each task's fastest programs and its default schedule are timed again in two passes
// of one batch; the best cost then comes from those times, and the budget is not charged.
TEST(Tuner, FinalistsAreReMeasuredSideBySide) {
  FakeBuilder builder;
  LoadedRunner runner;
  auto model = search::make_random_model(1);
  Tuner tuner(two_tasks(), small_options(32), *model, builder, runner);
  tune(tuner);
  const int trials = tuner.trials();
  runner.load = 3;  // every finalist three times slower than when it was searched
  runner.batches = 0;
  std::vector<RoundReport> batches;
  tuner.remeasure_finalists(2, [&](const RoundReport& r) { batches.push_back(r); });
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(runner.batches, 4) << "two passes per task";
  EXPECT_EQ(tuner.trials(), trials);
  for (const RoundReport& b : batches) {
    EXPECT_TRUE(b.finalists);
    ASSERT_EQ(b.inputs.size(), 3u);  // the default and two programs
    EXPECT_TRUE(b.inputs[0].default_schedule);
    EXPECT_NE(state::print_state(b.inputs[1].state), state::print_state(b.inputs[2].state));
    EXPECT_NEAR(b.reference_drift, 1.0, 1e-12) << "both passes ran at the same load";
    double fastest = INFINITY;
    for (const measure::MeasureResult& r : b.results) {
      if (r.error != measure::MeasureError::None) continue;
      EXPECT_EQ(r.costs.size(), 2u) << "one time per pass";
      fastest = std::min(fastest, search::mean_cost(r));
    }
    EXPECT_EQ(tuner.best_cost(b.task), fastest);
    EXPECT_GT(tuner.best_cost(b.task), 2 * tuner.search(b.task).best_cost()) << "the re-measured times, not the search's";
  }
  EXPECT_TRUE(std::isfinite(tuner.objective()));
}

// A task's roofline is its FLOPs at the peak or its bytes (placeholders and outputs) at the
// bandwidth, whichever is longer; unknown without either.
TEST(Tuner, RooflineIsTheSlowerOfComputeAndMemory) {
  FakeBuilder builder;
  FakeRunner runner;
  auto model = search::make_random_model(1);
  search::TunerOptions o = small_options(8);
  Tuner unknown(two_tasks(), o, *model, builder, runner);
  EXPECT_EQ(unknown.roofline_s(0), 0);
  o.peak_flops = 1e9;
  o.bandwidth = 1e12;  // memory is never the limit here
  Tuner compute(two_tasks(), o, *model, builder, runner);
  EXPECT_DOUBLE_EQ(compute.roofline_s(0), 2.0 * 64 * 32 * 48 / 1e9);
  o.peak_flops = 1e18;
  o.bandwidth = 1e6;
  Tuner memory(two_tasks(), o, *model, builder, runner);
  double bytes = 0;
  const std::vector<TuneTask> tasks = two_tasks();
  const te::ComputeDAG& dag = *tasks[0].dag;
  for (const te::TensorRef& t : dag.placeholders) bytes += static_cast<double>(num_elements(t->shape)) * 4;
  for (const te::TensorRef& t : dag.outputs) bytes += static_cast<double>(num_elements(t->shape)) * 4;
  EXPECT_DOUBLE_EQ(memory.roofline_s(0), bytes / 1e6);
}

// Database samples reach the cost model before the search asks it anything, and stay in every later
// training set; they are no trials, and each measured program's features come back in its round.
TEST(Tuner, PretrainedSamplesTrainTheModelBeforeTheFirstRound) {
  class Recording : public search::CostModel {
   public:
    std::vector<size_t> samples_at_update;
    size_t samples = 0, samples_at_first_predict = SIZE_MAX;
    void update(const std::vector<search::MeasuredSample>& s) override {
      samples += s.size();
      samples_at_update.push_back(samples);
    }
    std::vector<double> predict(const std::vector<search::ProgramFeatures>& p) override {
      if (samples_at_first_predict == SIZE_MAX) samples_at_first_predict = samples;
      return std::vector<double>(p.size(), 0.0);
    }
    size_t num_samples() const override { return samples; }
    bool wants_features() const override { return true; }
  } model;
  FakeBuilder builder;
  FakeRunner runner;
  Tuner tuner({two_tasks()[0]}, small_options(16), model, builder, runner);
  std::vector<search::MeasuredSample> db(100, {"elsewhere", {std::vector<float>(search::kFeaturesPerStore, 1.0f)}, 1e-3});
  tuner.pretrain(db);
  int with_features = 0, programs = 0;
  tuner.tune([&](const RoundReport& r) {
    ASSERT_EQ(r.features.size(), r.inputs.size());
    for (size_t i = 0; i < r.inputs.size(); ++i) {
      if (r.inputs[i].default_schedule) {
        EXPECT_TRUE(r.features[i].empty());
        continue;
      }
      ++programs;
      with_features += !r.features[i].empty();
    }
  });
  EXPECT_EQ(model.samples_at_first_predict, 100u);
  ASSERT_GE(model.samples_at_update.size(), 2u);
  EXPECT_EQ(model.samples_at_update.front(), 100u);
  EXPECT_EQ(tuner.trials(), 16);
  EXPECT_EQ(programs, with_features) << "every program of these DAGs lowers";
}

// FakeRunner behind a device that comes and goes: the first `down_calls` calls lose every program,
// and after that every program whose time hash is a multiple of 5 is lost the first time it runs.
class FlakyDevice : public FakeRunner {
 public:
  int down_calls = 0;
  int calls = 0;
  std::map<std::string, int> runs;  // per printed program (the default schedule included)
  std::vector<measure::MeasureResult> run(const std::vector<measure::MeasureInput>& inputs,
                                          const std::vector<measure::BuildResult>& builds) override {
    std::vector<measure::MeasureResult> out = FakeRunner::run(inputs, builds);
    const bool down = calls++ < down_calls;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::string p = state::print_state(inputs[i].state);
      const bool first = runs[p]++ == 0;
      if (down || (first && !inputs[i].default_schedule && std::hash<std::string>()(p) % 5 == 0)) {
        out[i] = {};
        out[i].error = measure::MeasureError::DeviceLost;
        out[i].error_msg = "connection: the board went away";
      }
    }
    return out;
  }
};

TEST(Tuner, ALostDeviceCostsNoTrialsAndItsProgramsAreMeasuredAgain) {
  FakeBuilder builder;
  FlakyDevice device;
  device.down_calls = 3;  // the first rounds' chunks, whole
  auto model = search::make_random_model(1);
  search::TunerOptions o = small_options(40);
  o.device_first_wait_s = 0.001;
  std::vector<std::string> notes;
  o.on_note = [&](const std::string& n) { notes.push_back(n); };
  Tuner tuner(two_tasks(), o, *model, builder, device);
  const TuneRun run = tune(tuner);
  EXPECT_EQ(tuner.trials(), 40) << "lost programs are no trials";
  EXPECT_EQ(run.programs.size() + static_cast<size_t>(run.defaults), 40u);
  EXPECT_FALSE(notes.empty());
  EXPECT_NE(notes[0].find("the board went away"), std::string::npos) << notes[0];
  for (int t = 0; t < 2; ++t) {
    EXPECT_FALSE(tuner.scheduler().progress(t).dead) << tuner.scheduler().progress(t).why_dead;
    EXPECT_TRUE(std::isfinite(tuner.search(t).best_cost()));
  }
  // Every program lost once ran again and was reported once, with its time.
  int lost_then_measured = 0;
  for (const auto& [p, n] : device.runs)
    if (n == 2 && std::count(run.programs.begin(), run.programs.end(), p) == 1) ++lost_then_measured;
  EXPECT_GT(lost_then_measured, 0);
  EXPECT_EQ(std::set<std::string>(run.programs.begin(), run.programs.end()).size(), run.programs.size());
}

TEST(Tuner, ADeviceLostForGoodStopsTheTuneWithAnErrorAndNoRecord) {
  FakeBuilder builder;
  FlakyDevice device;
  device.down_calls = 1 << 30;
  auto model = search::make_random_model(1);
  search::TunerOptions o = small_options(40);
  o.device_first_wait_s = 0.001;
  o.device_wait_s = 0.01;
  int rounds = 0;
  Tuner tuner(two_tasks(), o, *model, builder, device);
  try {
    tuner.tune([&](const RoundReport&) { ++rounds; });
    ADD_FAILURE() << "tune returned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the device has been lost"), std::string::npos) << e.what();
  }
  EXPECT_EQ(rounds, 0);
  EXPECT_EQ(tuner.trials(), 0);
  EXPECT_FALSE(tuner.scheduler().progress(0).dead);
  // Each lost round ran one chunk: the rest of its batch was not sent to a device known to be gone.
  EXPECT_LT(device.calls, 12);
}

}  // namespace
}  // namespace kiln
