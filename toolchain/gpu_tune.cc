#include "toolchain/gpu_tune.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "backends/cuda/cuda_module.h"
#include "backends/measure/records.h"
#include "backends/measure/sample_database.h"
#include "frontend/ir/error.h"
#include "scheduler/lower/gpu_shared_tiles.h"
#include "scheduler/search/gpu_tile_search.h"
#include "scheduler/state/steps/gpu_tile_step.h"

namespace kiln {
namespace {

constexpr double kUnmeasured = std::numeric_limits<double>::infinity();

struct TaskState {
  const search::TuneTask* task = nullptr;
  std::vector<search::GpuStageSpace> space;
  std::set<search::GpuChoice> seen;  // every program measured or restored (the default apart)
  bool default_seen = false;
  double default_s = kUnmeasured, best_s = kUnmeasured;
  search::GpuChoice default_choice;  // the default rule's tiles, as a choice: where mutations start until a tile beats it
  search::GpuChoice best;            // empty until something ran
  int measured = 0;
  int stale_rounds = 0;  // rounds since the best improved
  bool exhausted = false;
};

// The choice a restored program makes, or nullopt when one of its tiles is not in the space.
std::optional<search::GpuChoice> choice_of(const state::State& s, const std::vector<search::GpuStageSpace>& space) {
  search::GpuChoice c(space.size(), -1);
  for (const state::StepRef& st : s.steps()) {
    const auto* gt = dynamic_cast<const state::GpuTileStep*>(st.get());
    if (!gt) return std::nullopt;
    auto k = std::find_if(space.begin(), space.end(), [&](const search::GpuStageSpace& x) { return x.stage_id == gt->stage_id; });
    if (k == space.end()) return std::nullopt;
    if (gt->none()) continue;
    const lower::GpuSharedTile t{gt->block, gt->thread_tile, gt->k_chunk, gt->prefetch};
    auto i = std::find(k->tiles.begin(), k->tiles.end(), t);
    if (i == k->tiles.end()) return std::nullopt;
    c[static_cast<size_t>(k - space.begin())] = static_cast<int>(i - k->tiles.begin());
  }
  return c;
}

void take_result(TaskState& t, const search::GpuChoice* choice, const measure::MeasureResult& r, bool is_default) {
  ++t.measured;
  if (r.error != measure::MeasureError::None || r.costs.empty()) return;
  const double s = search::mean_cost(r);
  if (is_default) t.default_s = std::min(t.default_s, s);
  if (s < t.best_s) {
    t.best_s = s;
    t.best = is_default || !choice ? t.default_choice : *choice;
  }
}

std::string ms(double s) { return std::isfinite(s) ? fmt::format("{:.4f}", s * 1e3) : "-"; }

// A program of the round: its choice and, where the model wants them, its feature rows.
struct Candidate {
  search::GpuChoice choice;
  search::ProgramFeatures features;
};

// The round's programs: `batch` unmeasured ones, half mutations of the task's best and half random
// draws; with a model that has learned, the ones it ranks best of a pool of such draws and a fifth
// from the rest of the pool. Every program returned is marked seen.
std::vector<Candidate> choose_batch(TaskState& t, int batch, const GpuTuneOptions& options,
                                    const lower::GpuScheduleParams& gp, std::mt19937_64& rng) {
  const bool rank = options.model && options.model->wants_features();
  const int want = rank ? std::max(options.pool, batch) : batch;
  std::vector<Candidate> pool;
  std::set<search::GpuChoice> drawn;
  for (int tries = 0; static_cast<int>(pool.size()) < want && tries < want * 20; ++tries) {
    const bool mutate = !t.best.empty() && (tries % 2 == 0);
    search::GpuChoice c = mutate ? search::mutate_gpu_choice(t.space, t.best, rng) : search::random_gpu_choice(t.space, rng);
    if (t.seen.count(c) || !drawn.insert(c).second) continue;
    pool.push_back({std::move(c), {}});
  }
  if (rank && static_cast<int>(pool.size()) > batch) {
    std::vector<search::ProgramFeatures> rows;
    for (Candidate& c : pool) {
      c.features = search::gpu_program_features(search::gpu_program(t.task->dag, t.space, c.choice), gp);
      rows.push_back(c.features);
    }
    const std::vector<double> score = options.model->predict(rows);
    std::vector<size_t> order(pool.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return score[a] > score[b]; });
    const size_t explore = static_cast<size_t>(batch / 5), best = static_cast<size_t>(batch) - explore;
    std::shuffle(order.begin() + static_cast<std::ptrdiff_t>(best), order.end(), rng);
    std::vector<Candidate> picked;
    for (size_t i = 0; i < static_cast<size_t>(batch); ++i) picked.push_back(std::move(pool[order[i]]));
    pool = std::move(picked);
  }
  for (const Candidate& c : pool) t.seen.insert(c.choice);
  return pool;
}

}  // namespace

int tune_gpu(const std::vector<search::TuneTask>& tasks, const Target& target, const GpuTuneOptions& options,
             measure::Builder& builder, measure::ProgramRunner& runner, const std::string& records_path, std::ostream& out) {
  if (!target.gpu) throw Error("tune: target " + target.name + " is not a CUDA target");
  const lower::GpuScheduleParams gp = cuda::gpu_schedule_for(target.cores, *target.gpu);
  std::vector<TaskState> states;
  for (const search::TuneTask& t : tasks) {
    TaskState s;
    s.task = &t;
    s.space = search::gpu_task_space(*t.dag, gp);
    if (s.space.empty()) continue;
    for (const search::GpuStageSpace& st : s.space) {
      const te::Stage& stage = *t.dag->tensors[static_cast<size_t>(st.stage_id) - t.dag->placeholders.size()]->stage;
      const std::optional<lower::GpuSharedTile> d = lower::choose_shared_tile(stage, gp);
      const auto at = d ? std::find(st.tiles.begin(), st.tiles.end(), *d) : st.tiles.end();
      s.default_choice.push_back(at == st.tiles.end() ? -1 : static_cast<int>(at - st.tiles.begin()));
    }
    states.push_back(std::move(s));
  }
  out << fmt::format("kiln tune: {} of {} task(s) have matmuls or convolutions to tile on {}; the others keep the "
                     "default GPU schedule\n",
                     states.size(), tasks.size(), target.name);
  if (states.empty()) return 0;
  std::sort(states.begin(), states.end(),
            [](const TaskState& a, const TaskState& b) { return a.task->flops * a.task->weight > b.task->flops * b.task->weight; });

  // Restore: programs measured by an earlier run are neither measured again nor drawn again.
  int trials = 0;
  std::vector<search::MeasuredSample> restored;  // what the model learns before the first round
  if (std::filesystem::exists(records_path)) {
    std::map<std::string, TaskState*> by_key;
    for (TaskState& s : states) by_key[s.task->key] = &s;
    for (const measure::Record& r : measure::load_records(records_path)) {
      auto it = by_key.find(r.task_key);
      if (it == by_key.end() || r.target != target.name || r.final_batch != 0) continue;
      TaskState& t = *it->second;
      try {
        const state::State program = r.default_schedule ? state::State(t.task->dag) : measure::replay_record(r, t.task->dag);
        const std::optional<search::GpuChoice> c = choice_of(program, t.space);
        if (!r.default_schedule && !c) continue;
        if (r.default_schedule) t.default_seen = true;
        else t.seen.insert(*c);
        take_result(t, c ? &*c : nullptr, r.result, r.default_schedule);
        ++trials;
        if (options.model)
          if (search::ProgramFeatures f = search::gpu_program_features(program, gp); !f.empty())
            restored.push_back({t.task->key, std::move(f), search::mean_cost(r.result)});
      } catch (const Error&) {
      }
    }
    if (trials) out << fmt::format("kiln tune: {} program(s) restored from {}\n", trials, records_path);
  }
  if (options.model && !restored.empty()) options.model->update(restored);

  std::mt19937_64 rng(options.seed * 0x9E3779B97F4A7C15ull + 1);
  int measured_now = 0, round = 0;
  while (trials < options.trials) {
    // Untimed tasks first (by FLOPs), then the one that costs the model most, less each round that
    // did not improve it (a task whose search has stalled yields to the next).
    TaskState* pick = nullptr;
    double worst = -1;
    for (TaskState& s : states) {
      if (s.exhausted) continue;
      if (s.measured == 0) {
        pick = &s;
        break;
      }
      if (!std::isfinite(s.best_s)) continue;  // nothing of it ran
      const double cost = s.best_s * s.task->weight / (1 + s.stale_rounds);
      if (cost > worst) {
        worst = cost;
        pick = &s;
      }
    }
    if (!pick) break;  // every task's space is measured, or none of its programs ran
    TaskState& t = *pick;
    // TVM's rule, as the CPU tuner's: a budget shared by many tasks measures fewer programs a round,
    // so that every task is measured before any gets a second round.
    const int share = std::clamp(options.trials / static_cast<int>(states.size()), 2, std::max(options.per_round, 2));
    const int batch = std::min(share, options.trials - trials);
    std::vector<measure::MeasureInput> inputs;
    std::vector<Candidate> candidates;
    std::vector<bool> is_default;
    if (!t.default_seen) {
      t.default_seen = true;
      inputs.push_back({t.task->key, t.task->dag, state::State(t.task->dag), 0, true});
      candidates.emplace_back();
      is_default.push_back(true);
    }
    for (Candidate& c : choose_batch(t, batch - static_cast<int>(inputs.size()), options, gp, rng)) {
      inputs.push_back({t.task->key, t.task->dag, search::gpu_program(t.task->dag, t.space, c.choice)});
      candidates.push_back(std::move(c));
      is_default.push_back(false);
    }
    if (inputs.empty()) {  // every program of the task has been measured
      t.exhausted = true;
      continue;
    }
    const double best_before = t.best_s;
    const std::vector<measure::BuildResult> builds = builder.build(inputs);
    const std::vector<measure::MeasureResult> results = runner.run(inputs, builds);
    // A program whose device went away says nothing about the program: it is neither recorded nor
    // counted, and a round that lost them all ends the tuning (the records resume it).
    std::vector<std::string> lines, sample_lines;
    std::vector<search::MeasuredSample> samples;
    int errors = 0, lost = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (results[i].error == measure::MeasureError::DeviceLost) {
        ++lost;
        continue;
      }
      lines.push_back(measure::record_line(inputs[i].task_key, target, inputs[i].state, results[i], is_default[i]));
      take_result(t, &candidates[i].choice, results[i], is_default[i]);
      errors += results[i].error != measure::MeasureError::None;
      search::ProgramFeatures& f = candidates[i].features;
      if (f.empty()) f = search::gpu_program_features(inputs[i].state, gp);
      if (f.empty()) continue;
      sample_lines.push_back(measure::sample_line(t.task->key, target.name, f, search::mean_cost(results[i])));
      samples.push_back({t.task->key, std::move(f), search::mean_cost(results[i])});
    }
    if (lost == static_cast<int>(inputs.size()))
      throw Error(fmt::format("tune: the device ran none of {} program(s) of task {}: {}", inputs.size(), t.task->key,
                              results.front().error_msg));
    measure::append_record_lines(records_path, lines);
    // Samples after the records (a kill between the two loses samples, never a record), as CPU tuning.
    if (!sample_lines.empty()) measure::append_record_lines(measure::features_path(records_path), sample_lines);
    if (options.model) options.model->update(samples);
    t.stale_rounds = t.best_s < best_before ? 0 : t.stale_rounds + 1;
    trials += static_cast<int>(inputs.size()) - lost;
    measured_now += static_cast<int>(inputs.size()) - lost;
    std::string first_error;
    for (const measure::MeasureResult& r : results)
      if (r.error != measure::MeasureError::None) {
        first_error = fmt::format(" (first: {}: {})", measure::measure_error_name(r.error), r.error_msg.substr(0, 160));
        break;
      }
    out << fmt::format("round {}: {} ({}): {} program(s), {} failed{}; default {} ms, best {} ms\n", ++round, t.task->label,
                       t.task->key.substr(0, 12), inputs.size(), errors, first_error, ms(t.default_s), ms(t.best_s));
    out.flush();
  }

  out << fmt::format("{:<44} {:>8} {:>12} {:>12} {:>8}\n", "task", "weight", "default ms", "tuned ms", "speedup");
  double before = 0, after = 0;
  for (const TaskState& s : states) {
    const double speedup = std::isfinite(s.default_s) && std::isfinite(s.best_s) ? s.default_s / s.best_s : 0;
    out << fmt::format("{:<44} {:>8} {:>12} {:>12} {:>8}\n", s.task->label.substr(0, 44), s.task->weight, ms(s.default_s),
                       ms(s.best_s), speedup > 0 ? fmt::format("{:.2f}x", speedup) : "-");
    if (std::isfinite(s.default_s) && std::isfinite(s.best_s)) {
      before += s.default_s * s.task->weight;
      after += s.best_s * s.task->weight;
    }
  }
  if (after > 0)
    out << fmt::format("tuned tasks together: default {:.4f} ms, tuned {:.4f} ms ({:.2f}x)\n", before * 1e3, after * 1e3,
                       before / after);
  return measured_now;
}

}  // namespace kiln
