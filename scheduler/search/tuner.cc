// The tuning loop: pick a task, propose, build, run, learn, report.
#include "scheduler/search/tuner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <thread>

#include <fmt/format.h>

#include "frontend/ir/error.h"

namespace kiln::search {
namespace {

using Clock = std::chrono::steady_clock;

// A per-task seed that does not depend on the order tasks were listed in (FNV-1a of the key, mixed
// with the tuning seed), so adding a model to a session does not change another task's candidates.
uint64_t task_seed(uint64_t seed, const std::string& key) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  return h ^ (seed * 0x9E3779B97F4A7C15ull);
}

// Bytes a task must move at least: its placeholders (inputs and weights) read once, its outputs
// written once.
double min_bytes(const te::ComputeDAG& dag) {
  double bytes = 0;
  for (const te::TensorRef& t : dag.placeholders) bytes += static_cast<double>(num_elements(t->shape) * dtype_size(t->dtype));
  for (const te::TensorRef& t : dag.outputs) bytes += static_cast<double>(num_elements(t->shape) * dtype_size(t->dtype));
  return bytes;
}

double roofline_of(const TuneTask& t, const TunerOptions& o) {
  const double compute = o.peak_flops > 0 ? t.flops / o.peak_flops : 0;
  const double memory = o.bandwidth > 0 && t.dag ? min_bytes(*t.dag) / o.bandwidth : 0;
  return std::max(compute, memory);
}

std::vector<SchedulerTask> scheduler_tasks(const std::vector<TuneTask>& tasks, const TunerOptions& o) {
  std::vector<SchedulerTask> out;
  for (const TuneTask& t : tasks) out.push_back({t.key, t.weight, t.flops, t.kind, roofline_of(t, o)});
  return out;
}

// Features of a measured program; none when it does not lower (the model then learns nothing from it,
// which is right: such a program never gets a time).
ProgramFeatures features_or_none(const state::State& s) {
  try {
    return state_features(s);
  } catch (const Error&) {
    return {};
  }
}

}  // namespace

double mean_cost(const measure::MeasureResult& r) {
  if (r.error != measure::MeasureError::None || r.costs.empty()) return std::numeric_limits<double>::infinity();
  // A restored record with a cost that is no real time (-1, 0, NaN) must not become the best program.
  for (double c : r.costs)
    if (!std::isfinite(c) || c <= 0) return std::numeric_limits<double>::infinity();
  return std::accumulate(r.costs.begin(), r.costs.end(), 0.0) / static_cast<double>(r.costs.size());
}

Tuner::Tuner(std::vector<TuneTask> tasks, TunerOptions options, CostModel& model, measure::Builder& builder,
             measure::ProgramRunner& runner)
    : tasks_(std::move(tasks)),
      options_(std::move(options)),
      model_(model),
      builder_(builder),
      runner_(runner),
      scheduler_(scheduler_tasks(tasks_, options_), options_.scheduler) {
  if (tasks_.empty()) throw Error("tune: no tasks");
  for (const TuneTask& t : tasks_)
    searches_.push_back(std::make_unique<TaskSearch>(t.key, t.dag, options_.params, options_.search,
                                                     task_seed(options_.seed, t.key)));
  restored_.resize(tasks_.size());
  lost_.resize(tasks_.size());
  next_wait_s_ = options_.device_first_wait_s;
  restored_trials_.assign(tasks_.size(), 0);
  default_cost_.assign(tasks_.size(), std::numeric_limits<double>::infinity());
  default_measured_.assign(tasks_.size(), false);
  final_cost_.assign(tasks_.size(), std::numeric_limits<double>::quiet_NaN());
  for (const TuneTask& t : tasks_) roofline_.push_back(roofline_of(t, options_));
}

int Tuner::round_size() const {
  const int share = options_.trials / static_cast<int>(tasks_.size());
  return std::clamp(share, 1, std::max(options_.measures_per_round, 1));
}

double Tuner::best_cost(int task) const {
  if (!std::isnan(final_cost_[task])) return final_cost_[task];
  return std::min(searches_[task]->best_cost(), default_cost_[task]);
}

double Tuner::objective() const {
  return scheduler_.objective([&](int task) { return best_cost(task); });
}

void Tuner::restore(int task, const state::State& s, const measure::MeasureResult& r, bool default_schedule) {
  const double cost = mean_cost(r);
  if (default_schedule) {
    default_cost_[task] = std::min(default_cost_[task], cost);
    default_measured_[task] = true;
  } else {
    searches_[task]->add_measured(s, cost);
    restored_[task].push_back({tasks_[task].key, features_or_none(s), cost});
  }
  ++restored_trials_[task];
  ++trials_;
}

void Tuner::pretrain(std::vector<MeasuredSample> samples) {
  for (MeasuredSample& s : samples) pretrain_.push_back(std::move(s));
}

void Tuner::finish_restore() {
  std::vector<MeasuredSample> all = std::move(pretrain_);
  pretrain_.clear();
  for (size_t t = 0; t < tasks_.size(); ++t) {
    if (restored_trials_[t] == 0) continue;
    scheduler_.report(static_cast<int>(t), restored_trials_[t], best_cost(static_cast<int>(t)), false);
    for (MeasuredSample& s : restored_[t]) all.push_back(std::move(s));
    restored_[t].clear();
    restored_trials_[t] = 0;
  }
  if (!all.empty()) model_.update(all);
  curve_.push_back({trials_, scheduler_.objective(), 0});
}

void Tuner::tune(const std::function<void(const RoundReport&)>& on_round) {
  finish_restore();
  const Clock::time_point start = Clock::now();
  while (trials_ < options_.trials) {
    const int t = scheduler_.next_task();
    if (t < 0) break;
    TaskSearch& search = *searches_[t];
    const int n = std::min(round_size(), options_.trials - trials_);
    RoundReport report;
    report.task = t;
    // The default schedule goes first: its time sets the cutoff for hopeless candidates at once. Rounds
    // of 8 or more measure it again, so that its best time, like the search's, is the fastest of
    // several moments on a machine whose speed drifts.
    const bool with_default = !default_measured_[t] || (options_.default_each_round && n >= 8);
    if (with_default) report.inputs.push_back({tasks_[t].key, tasks_[t].dag, state::State(tasks_[t].dag), 0, true});
    // Programs a lost device never timed go first, once more.
    std::vector<state::State> states = std::move(lost_[t]);
    lost_[t].clear();
    if (static_cast<int>(states.size()) > n - (with_default ? 1 : 0)) states.resize(static_cast<size_t>(n - (with_default ? 1 : 0)));
    const size_t retries = states.size();
    for (state::State& s : search.next_batch(model_, n - (with_default ? 1 : 0) - static_cast<int>(retries)))
      states.push_back(std::move(s));
    if (states.empty() && !with_default) {
      scheduler_.report(t, 0, best_cost(t), true);
      continue;
    }
    std::vector<bool> is_retry(with_default ? 1 : 0, false);
    for (size_t i = 0; i < states.size(); ++i) {
      report.inputs.push_back({tasks_[t].key, tasks_[t].dag, states[i]});
      is_retry.push_back(i < retries);
    }
    const std::vector<measure::BuildResult> builds = builder_.build(report.inputs);
    report.results = run_in_chunks(report.inputs, builds, best_cost(t));
    if (take_out_lost(report, is_retry) > 0 && report.inputs.empty()) {
      wait_for_device(report);
      continue;  // nothing was measured: no trials, no report, the same task again
    }
    waited_s_ = 0;
    next_wait_s_ = options_.device_first_wait_s;

    std::vector<MeasuredSample> samples;
    for (size_t i = 0; i < report.inputs.size(); ++i) {
      const double cost = mean_cost(report.results[i]);
      if (report.inputs[i].default_schedule) {
        if (std::isfinite(cost) && std::isfinite(default_cost_[t])) {
          report.reference_drift = cost / default_cost_[t];
          report.noisy = report.reference_drift > options_.noise_threshold;
          noisy_rounds_ += report.noisy;
        }
        default_cost_[t] = std::min(default_cost_[t], cost);
        default_measured_[t] = true;
        continue;
      }
      search.add_measured(report.inputs[i].state, cost);
      samples.push_back({tasks_[t].key, features_or_none(report.inputs[i].state), cost});
    }
    report.features.resize(report.inputs.size());
    for (size_t i = 0, k = 0; i < report.inputs.size(); ++i)
      if (!report.inputs[i].default_schedule) report.features[i] = samples[k++].features;
    const int measured = static_cast<int>(report.inputs.size());
    trials_ += measured;
    scheduler_.report(t, measured, best_cost(t), search.exhausted());
    curve_.push_back({trials_, scheduler_.objective(), std::chrono::duration<double>(Clock::now() - start).count()});
    on_round(report);  // before retraining: the records hold the batch as soon as possible
    model_.update(samples);
  }
}

int Tuner::take_out_lost(RoundReport& report, const std::vector<bool>& is_retry) {
  int lost = 0;
  size_t kept = 0;
  for (size_t i = 0; i < report.inputs.size(); ++i) {
    if (report.results[i].error != measure::MeasureError::DeviceLost) {
      if (kept != i) {  // never a self-move: it may leave the element empty
        report.inputs[kept] = std::move(report.inputs[i]);
        report.results[kept] = std::move(report.results[i]);
      }
      ++kept;
      continue;
    }
    ++lost;
    last_lost_ = report.results[i].error_msg;
    // Lost twice: a program that takes its device down with it is no program to wait for.
    if (!report.inputs[i].default_schedule && !is_retry[i]) lost_[report.task].push_back(report.inputs[i].state);
  }
  report.inputs.resize(kept);
  report.results.resize(kept);
  return lost;
}

void Tuner::wait_for_device(const RoundReport& lost) {
  if (waited_s_ >= options_.device_wait_s)
    throw Error(fmt::format("tune: the device has been lost for {:.0f} s ({}); the records so far are kept: run the "
                            "same command again to resume",
                            waited_s_, last_lost_));
  const double wait = std::min({next_wait_s_, 30.0, options_.device_wait_s - waited_s_});
  if (options_.on_note)
    options_.on_note(fmt::format("kiln: note: the device was lost in a round of task {} ({}); trying again in {:.0f} s, "
                                 "nothing of it counted or recorded",
                                 lost.task, last_lost_, wait));
  std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  waited_s_ += wait;
  next_wait_s_ = std::min(next_wait_s_ * 2, 30.0);
}

void Tuner::remeasure_finalists(int per_task, const std::function<void(const RoundReport&)>& on_batch) {
  if (per_task <= 0) return;
  for (size_t t = 0; t < tasks_.size(); ++t) {
    const std::vector<state::State> best = searches_[t]->best_states(static_cast<size_t>(per_task));
    if (best.empty()) continue;  // no searched program ran: the default schedule stands unchallenged
    RoundReport report;
    report.task = static_cast<int>(t);
    report.finalists = true;
    report.inputs.push_back({tasks_[t].key, tasks_[t].dag, state::State(tasks_[t].dag), 0, true});
    for (const state::State& s : best) report.inputs.push_back({tasks_[t].key, tasks_[t].dag, s});
    const std::vector<measure::BuildResult> builds = builder_.build(report.inputs);
    // Two passes over the whole batch: every candidate is timed twice, in turns with the others. How far
    // the reference (the default schedule, first) moved between them says how steady the machine was.
    std::vector<measure::MeasureResult> first = runner_.run(report.inputs, builds);
    const std::vector<measure::MeasureResult> second = runner_.run(report.inputs, builds);
    if (first.size() != report.inputs.size() || second.size() != report.inputs.size())
      throw InternalError("tune: the runner returned a result count other than the batch's");
    const double pass1 = mean_cost(first[0]), pass2 = mean_cost(second[0]);
    if (std::isfinite(pass1) && std::isfinite(pass2)) {
      report.reference_drift = std::max(pass1, pass2) / std::min(pass1, pass2);
      report.noisy = report.reference_drift > options_.noise_threshold;
      noisy_rounds_ += report.noisy;
    }
    double fastest = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < first.size(); ++i) {
      measure::MeasureResult& r = first[i];
      if (r.error != measure::MeasureError::None) continue;  // failed in the first pass: that result stands
      if (second[i].error != measure::MeasureError::None) {
        r = second[i];
        continue;
      }
      r.costs.insert(r.costs.end(), second[i].costs.begin(), second[i].costs.end());
      r.all_cost_s += second[i].all_cost_s;
      r.timestamp = second[i].timestamp;
      fastest = std::min(fastest, mean_cost(r));
    }
    report.results = std::move(first);
    // A finalist whose device was lost is not re-measured and not recorded; if nothing was, the
    // search's times stand.
    const int lost = take_out_lost(report, std::vector<bool>(report.inputs.size(), true));
    if (std::isfinite(fastest) || lost == 0) final_cost_[t] = fastest;
    if (!report.inputs.empty()) on_batch(report);
  }
}

std::vector<measure::MeasureResult> Tuner::run_in_chunks(std::vector<measure::MeasureInput>& inputs,
                                                        const std::vector<measure::BuildResult>& builds,
                                                        double best) {
  // Random programs of one task can differ 400x in time (a 1024^3 matmul: 25 ms to over 10 s a call),
  // so candidates 20x slower than the best known (and than 50 ms) are timed by one call and cut off
  // soon after. Running in chunks lets the first round of a task learn its best as it goes (in chunks
  // of 2 until a time is known, so at most two candidates run without a cutoff).
  std::vector<measure::MeasureResult> results;
  bool device_lost = false;  // a whole chunk came back lost: the rest of the batch would wait for it too
  for (size_t from = 0, to = 0; from < inputs.size(); from = to) {
    to = std::min(inputs.size(), from + (std::isfinite(best) ? 8 : 2));
    if (device_lost) {
      for (size_t i = from; i < to; ++i) {
        measure::MeasureResult r;
        r.error = measure::MeasureError::DeviceLost;
        r.error_msg = results.back().error_msg;
        results.push_back(std::move(r));
      }
      continue;
    }
    const double slow = std::isfinite(best) ? std::max(20 * best, 0.05) : 0;
    std::vector<measure::MeasureInput> chunk(inputs.begin() + from, inputs.begin() + to);
    for (measure::MeasureInput& in : chunk) in.slow_call_s = slow;
    const std::vector<measure::BuildResult> chunk_builds(builds.begin() + from, builds.begin() + to);
    device_lost = true;
    for (measure::MeasureResult& r : runner_.run(chunk, chunk_builds)) {
      best = std::min(best, mean_cost(r));
      device_lost = device_lost && r.error == measure::MeasureError::DeviceLost;
      results.push_back(std::move(r));
    }
    for (size_t i = from; i < to; ++i) inputs[i].slow_call_s = slow;
  }
  return results;
}

}  // namespace kiln::search
