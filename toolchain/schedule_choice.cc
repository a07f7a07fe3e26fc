#include "toolchain/schedule_choice.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <random>

#include "backends/cuda/cuda_module.h"
#include "backends/measure/records.h"
#include "frontend/ir/error.h"
#include "scheduler/lower/gpu_task.h"
#include "scheduler/lower/bounds_check.h"
#include "scheduler/lower/lower_state.h"
#include "scheduler/sketch/random_program.h"
#include "scheduler/state/step.h"
#include "scheduler/te/analysis.h"

namespace kiln {

ScheduleChoice::Kind parse_schedule_kind(const std::string& s) {
  if (s == "default") return ScheduleChoice::Kind::Default;
  if (s == "random") return ScheduleChoice::Kind::Random;
  if (s == "gpu-serial") return ScheduleChoice::Kind::GpuSerial;
  if (s == "gpu-serial-random") return ScheduleChoice::Kind::GpuSerialRandom;
  throw Error("--schedule '" + s + "': expected default, random, gpu-serial or gpu-serial-random");
}

ScheduleChoice::Kind schedule_kind_of_flags(const std::string& schedule, const std::string& records_path) {
  const ScheduleChoice::Kind kind = parse_schedule_kind(schedule);
  if (records_path.empty()) return kind;
  if (kind != ScheduleChoice::Kind::Default)
    throw Error("--records and --schedule " + schedule + " exclude each other (tasks without a record get the default schedule)");
  return ScheduleChoice::Kind::Records;
}

namespace {

void note(ModelSchedule& s, const std::string& key, const std::string& line) {
  if (!s.noted.insert(key).second) return;
  if (s.choice.on_note) s.choice.on_note(line);
  else std::cerr << line << "\n";
}

void note_no_replay(ModelSchedule& s, const std::string& key, const std::string& why) {
  note(s, key, fmt::format("kiln: note: record for task {} does not replay ({}): default schedule", key, why));
}

// The fastest recorded program of a task that replays on its first occurrence's DAG, or nullopt
// (with a note). A record from another kiln version or a hand edit may not replay; the next-best
// valid record is the better fallback than the default schedule, unless the default itself was
// measured faster.
std::optional<state::State> recorded_program(ModelSchedule& s, const std::map<std::string, std::vector<measure::Record>>& ranked,
                                             const Task& task, const std::shared_ptr<const te::ComputeDAG>& dag) {
  auto it = ranked.find(task.key);
  if (it == ranked.end()) {
    note(s, task.key, fmt::format("kiln: note: no tuning record for task {} ({}): default schedule", task.key,
                                  s.label_of_task[task.key]));
    return std::nullopt;
  }
  std::string first_failure;
  int failures = 0;
  for (const measure::Record& r : it->second) {
    if (r.default_schedule) break;  // measured faster than every tuned program still in the list
    try {
      std::optional<state::State> program = measure::replay_record(r, dag);
      if (s.gpu) lower::gpu_stage_tiles(*program, *s.gpu);  // throws for a tile the GPU cannot take
      if (failures > 0)
        note(s, task.key, fmt::format("kiln: note: the best {} record(s) for task {} do not replay ({}): using the next-best",
                                      failures, task.key, first_failure));
      return program;
    } catch (const Error& e) {
      if (failures++ == 0) first_failure = e.what();
    }
  }
  if (failures > 0) note_no_replay(s, task.key, first_failure);
  return std::nullopt;
}

std::string subgraph_list(const Task& t) {
  std::string s;
  for (int id : t.subgraphs) s += (s.empty() ? "" : ", ") + std::to_string(id);
  return s;
}

}  // namespace

ModelSchedule choose_schedules(const std::vector<Task>& tasks, size_t num_subgraphs, const ScheduleChoice& choice,
                               const CompileTarget& target, const StageDump& dump) {
  ModelSchedule s;
  s.choice = choice;
  s.params.cores = std::max(target.cores, 1);
  s.params.vector_lanes = std::max(target.vector_bits / 32, 1);
  s.default_params = lower::schedule_params_for(target.vector_bits);
  if (target.gpu) s.gpu = cuda::gpu_schedule_for(target.cores, *target.gpu);
  s.task_of_subgraph.resize(num_subgraphs);
  std::map<std::string, std::vector<measure::Record>> ranked;
  if (choice.kind == ScheduleChoice::Kind::Records)
    for (auto& [k, list] : measure::ranked_records(measure::load_records(choice.records_path)))
      if (k.second == target.name) ranked.emplace(k.first, std::move(list));
  for (const Task& task : tasks) {
    for (int id : task.subgraphs) s.task_of_subgraph.at(static_cast<size_t>(id)) = task.key;
    s.label_of_task[task.key] = task.anchor + " " + (task.node_names.empty() ? "?" : task.node_names.front());
    auto dag = std::make_shared<const te::ComputeDAG>(task.dag);
    state::State initial(dag);
    const std::string subject = fmt::format("task {} (subgraph {})", task.key, task.subgraphs.front());
    dump.dump("analysis", [&] { return te::print_analysis(*dag); }, subject);
    std::vector<state::State> sketches;
    if (choice.kind == ScheduleChoice::Kind::Random || dump.wants("sketch")) sketches = sketch::generate_sketches(initial, s.params);
    dump.dump("sketch", [&] {
      std::string text;
      for (size_t k = 0; k < sketches.size(); ++k)
        text += fmt::format("sketch {}:\n{}{}", k, state::print_steps(sketches[k]), state::print_state(sketches[k]));
      return text;
    }, subject);
    std::optional<state::State> program;
    if (choice.kind == ScheduleChoice::Kind::Random) {
      sketch::Rng rng(choice.seed * 0x9E3779B97F4A7C15ull ^ std::hash<std::string>{}(task.key));
      program = sketch::sample_program(sketches, s.params, rng);
    } else if (choice.kind == ScheduleChoice::Kind::Records) {
      program = recorded_program(s, ranked, task, dag);
    }
    dump.dump("schedule", [&] {
      const std::string head = fmt::format("{}, subgraphs {}\n", s.label_of_task[task.key], subgraph_list(task));
      return program ? head + state::print_steps(*program) + state::print_state(*program) : head + "default schedule\n";
    }, subject);
    s.program_of_task.emplace(task.key, std::move(program));
  }
  return s;
}

lower::SubgraphScheduler subgraph_scheduler(std::shared_ptr<ModelSchedule> s) {
  return [s](const LoweredSubgraph& sg, int id, const std::map<const te::TensorNode*, lower::BufferRef>& buffers,
             std::vector<lower::BufferRef>& temps) -> lower::Stmt {
    const std::string& key = s->task_of_subgraph.at(static_cast<size_t>(id));
    std::optional<state::State>& chosen = s->program_of_task[key];
    const int lanes = lower::lanes_of(s->default_params.vector_bits);
    // Every nest is proven to stay inside its buffers (scheduler/lower/bounds_check.h) before it is
    // compiled: a default schedule that fails is kiln's bug; a chosen program that fails is refused.
    auto default_nest = [&] {
      lower::Stmt st = lower::lower_subgraph_default(sg, id, buffers, temps, s->default_params);
      if (auto v = lower::first_out_of_bounds(st, lower::kMaxStackBytes, lanes))
        throw InternalError(fmt::format("subgraph {}: the default schedule's {}", id, lower::describe(*v)));
      return st;
    };
    if (!chosen) return default_nest();
    const bool recorded = s->choice.kind == ScheduleChoice::Kind::Records;
    auto dag = std::make_shared<const te::ComputeDAG>(sg.dag);
    state::State program;
    try {
      program = state::replay(dag, chosen->steps());
    } catch (const state::ScheduleError& e) {
      if (recorded) {  // a record is not redrawn: this occurrence runs the default
        note_no_replay(*s, key, e.what());
        return default_nest();
      }
      sketch::Rng rng(s->choice.seed ^ static_cast<uint64_t>(id));  // stages ordered differently: draw for this occurrence
      program = sketch::sample_program(sketch::generate_sketches(state::State(dag), s->params), s->params, rng);
    }
    // A record may come from another kiln version or a hand edit: one that replays but does not lower,
    // or whose nest may leave a buffer, falls back like one that does not replay, dropping whatever
    // temporaries the attempt added. So does a random program that may leave a buffer.
    const size_t temps_before = temps.size();
    try {
      lower::Stmt st = lower::lower_state(program, buffers, temps);
      if (auto v = lower::first_out_of_bounds(st, lower::kMaxStackBytes, lanes)) throw lower::BoundsError(lower::describe(*v));
      return st;
    } catch (const Error& e) {
      if (!recorded && !dynamic_cast<const lower::BoundsError*>(&e)) throw;
      temps.erase(temps.begin() + static_cast<std::ptrdiff_t>(temps_before), temps.end());
      if (recorded) note_no_replay(*s, key, std::string("lowering: ") + e.what());
      else note(*s, key, fmt::format("kiln: note: the random program for task {} is refused ({}): default schedule", key, e.what()));
      chosen.reset();
      return default_nest();
    }
  };
}

}  // namespace kiln
