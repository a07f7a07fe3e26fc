// The gradient and round-robin task schedulers of task_scheduler.h.
#include "scheduler/search/task_scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "frontend/ir/error.h"

namespace kiln::search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Ansor's rule for leaving a similarity group: this many rounds beyond every other member.
constexpr int kExtraRoundsBeforeLeavingGroup = 5;

std::string task_name(const std::vector<SchedulerTask>& tasks, int task) {
  return "task " + std::to_string(task) + " (" + tasks[task].key + ")";
}

// FLOPs per second for a task of `flops` at `cost` seconds; 0 when it has no program.
double throughput(double flops, double cost) {
  if (!std::isfinite(cost)) return 0;
  if (cost <= 0) return kInf;
  return flops / cost;
}

// Similarity groups: tasks of the same kind whose FLOPs agree in floor(log2). Tasks without a kind or
// without FLOPs belong to no group (-1): nothing says what they resemble.
std::vector<int> similarity_groups(const std::vector<SchedulerTask>& tasks) {
  std::map<std::pair<std::string, int>, int> group_of_tag;
  std::vector<int> groups;
  for (const SchedulerTask& t : tasks) {
    if (t.kind.empty() || !(t.flops > 0)) {
      groups.push_back(-1);
      continue;
    }
    const auto tag = std::make_pair(t.kind, static_cast<int>(std::floor(std::log2(t.flops))));
    const auto [it, inserted] = group_of_tag.emplace(tag, static_cast<int>(group_of_tag.size()));
    groups.push_back(it->second);
  }
  return groups;
}

}  // namespace

TaskScheduler::TaskScheduler(std::vector<SchedulerTask> tasks, TaskSchedulerOptions options)
    : tasks_(std::move(tasks)), options_(options), progress_(tasks_.size()) {
  if (tasks_.empty()) throw Error("task scheduler: no tasks");
  for (size_t i = 0; i < tasks_.size(); ++i) {
    const int task = static_cast<int>(i);
    if (!(tasks_[i].weight > 0) || !std::isfinite(tasks_[i].weight))
      throw Error("task scheduler: " + task_name(tasks_, task) + " has weight " +
                  std::to_string(tasks_[i].weight) + "; it must be positive and finite");
    if (!(tasks_[i].flops >= 0) || !std::isfinite(tasks_[i].flops))
      throw Error("task scheduler: " + task_name(tasks_, task) + " has flops " +
                  std::to_string(tasks_[i].flops) + "; they must be non-negative and finite");
  }
  if (!(options_.alpha >= 0 && options_.alpha <= 1))
    throw Error("task scheduler: alpha " + std::to_string(options_.alpha) + " is outside [0, 1]");
  if (!(options_.beta > 0)) throw Error("task scheduler: beta " + std::to_string(options_.beta) + " is not positive");
  if (options_.backward_window < 1)
    throw Error("task scheduler: backward window " + std::to_string(options_.backward_window) + " is below 1");
  group_ = similarity_groups(tasks_);
}

int TaskScheduler::next_task() {
  if (const int warmup = warmup_task(); warmup >= 0) return warmup;
  if (stopped_early()) return -1;
  return options_.strategy == TaskSchedulerOptions::Strategy::Gradient ? gradient_task() : round_robin_task();
}

int TaskScheduler::warmup_task() const {
  for (size_t i = 0; i < progress_.size(); ++i)
    if (!progress_[i].dead && progress_[i].rounds == 0) return static_cast<int>(i);
  return -1;
}

// Global early stopping, as Ansor: only once every task has had its warm-up and the objective is
// finite, counted from the trial at which the objective last improved.
bool TaskScheduler::stopped_early() const {
  if (options_.early_stopping < 0) return false;
  if (!std::isfinite(best_objective_)) return false;
  return total_trials_ - best_objective_trial_ >= options_.early_stopping;
}

int TaskScheduler::gradient_task() const {
  int best = -1;
  double best_grad = kInf;
  for (size_t i = 0; i < progress_.size(); ++i) {
    if (progress_[i].dead) continue;
    const double grad = gradient(static_cast<int>(i));
    if (grad < best_grad) {  // strict: ties keep the lowest index
      best = static_cast<int>(i);
      best_grad = grad;
    }
  }
  return best;
}

int TaskScheduler::round_robin_task() {
  const size_t n = progress_.size();
  for (size_t step = 0; step < n; ++step) {
    const size_t i = (next_round_robin_ + step) % n;
    if (progress_[i].dead) continue;
    next_round_robin_ = (i + 1) % n;
    return static_cast<int>(i);
  }
  return -1;
}

double TaskScheduler::best_similar_throughput(int task) const {
  double best = throughput(tasks_[task].flops, progress_[task].best_cost);
  if (group_[task] < 0) return best;
  for (size_t j = 0; j < tasks_.size(); ++j)
    if (group_[j] == group_[task]) best = std::max(best, throughput(tasks_[j].flops, progress_[j].best_cost));
  return best;
}

double TaskScheduler::gradient(int task) const {
  if (task < 0 || static_cast<size_t>(task) >= tasks_.size())
    throw Error("task scheduler: gradient of unknown task " + std::to_string(task));
  const TaskProgress& p = progress_[task];
  if (p.dead || p.rounds == 0 || !std::isfinite(p.best_cost)) return 0;
  const double cost = p.best_cost;
  const double chain = tasks_[task].weight;

  // The recent slope: best cost now against W rounds ago, per trial spent in between.
  double backward = 0;
  const int window = options_.backward_window;
  if (p.rounds > window) {
    const size_t now = p.best_history.size() - 1;
    const size_t then = now - static_cast<size_t>(window);
    const int spent = p.trials_history[now] - p.trials_history[then];
    const double before = p.best_history[then];
    if (spent > 0 && std::isfinite(before)) backward = (p.best_history[now] - before) / spent;
  }

  // The optimistic next step: as much per trial as the average so far, or to within β of the best
  // similar task's throughput over one round of the size of the last one.
  const double trials = std::max(p.trials, 1);
  double forward = -cost / trials;
  const double v_max = best_similar_throughput(task);
  if (tasks_[task].flops > 0 && v_max > 0 && std::isfinite(v_max)) {
    const int before_last_round = p.rounds > 1 ? p.trials_history[p.rounds - 2] : 0;
    const double round_size = std::max(p.trials_history.back() - before_last_round, 1);
    const double reachable = options_.beta * tasks_[task].flops / v_max;
    forward = std::min(forward, (reachable - cost) / round_size);
  }
  return chain * (options_.alpha * backward + (1 - options_.alpha) * forward);
}

void TaskScheduler::report(int task, int trials, double best_cost, bool exhausted) {
  if (task < 0 || static_cast<size_t>(task) >= tasks_.size())
    throw Error("task scheduler: report for unknown task " + std::to_string(task) + " of " +
                std::to_string(tasks_.size()));
  if (trials < 0)
    throw Error("task scheduler: " + task_name(tasks_, task) + " reported " + std::to_string(trials) + " trials");
  if (std::isnan(best_cost)) throw Error("task scheduler: " + task_name(tasks_, task) + " reported a NaN best cost");
  TaskProgress& p = progress_[task];
  if (best_cost > p.best_cost)
    throw Error("task scheduler: " + task_name(tasks_, task) + " reported best cost " + std::to_string(best_cost) +
                " above its earlier best " + std::to_string(p.best_cost));

  p.rounds += 1;
  p.trials += trials;
  total_trials_ += trials;
  if (best_cost < p.best_cost) {
    p.best_cost = best_cost;
    p.best_trial = p.trials;
  }
  p.best_history.push_back(p.best_cost);
  p.trials_history.push_back(p.trials);

  if (!p.dead) {
    if (p.rounds == 1 && !std::isfinite(p.best_cost)) {
      p.dead = true;
      p.why_dead = "no valid program";
    } else if (exhausted) {
      p.dead = true;
      p.why_dead = "exhausted";
    } else if (options_.early_stopping >= 0 && p.trials - p.best_trial >= options_.early_stopping) {
      p.dead = true;
      p.why_dead = "no progress";
    } else if (const double roof = tasks_[task].roofline_s;
               roof > 0 && std::isfinite(p.best_cost) && roof >= options_.roofline_fraction * p.best_cost) {
      p.dead = true;
      p.why_dead = fmt::format("near its roofline ({:.0f}%)", 100 * roof / p.best_cost);
    }
  }
  maybe_leave_group(task);

  const double now = objective();
  if (now < best_objective_) {
    best_objective_ = now;
    best_objective_trial_ = total_trials_;
  }
}

// Ansor's correction of the similarity guess: a task tuned well beyond the rest of its group that
// still falls short of the group's best throughput by more than β does not resemble it.
void TaskScheduler::maybe_leave_group(int task) {
  const int group = group_[task];
  if (group < 0 || !std::isfinite(progress_[task].best_cost)) return;
  int most_other_rounds = -1;
  for (size_t j = 0; j < tasks_.size(); ++j)
    if (static_cast<int>(j) != task && group_[j] == group)
      most_other_rounds = std::max(most_other_rounds, progress_[j].rounds);
  if (most_other_rounds < 0) return;  // alone in its group
  const double own = throughput(tasks_[task].flops, progress_[task].best_cost);
  if (own < best_similar_throughput(task) / options_.beta &&
      progress_[task].rounds > kExtraRoundsBeforeLeavingGroup + most_other_rounds)
    group_[task] = -1;
}

double TaskScheduler::objective() const {
  return objective([&](int task) { return progress_[static_cast<size_t>(task)].best_cost; });
}

double TaskScheduler::objective(const std::function<double(int)>& best_of) const {
  double sum = 0;
  for (size_t i = 0; i < tasks_.size(); ++i) {
    const double best = best_of(static_cast<int>(i));
    if (std::isfinite(best)) {
      sum += tasks_[i].weight * best;
    } else if (!progress_[i].dead) {
      return kInf;
    }
  }
  return sum;
}

}  // namespace kiln::search
