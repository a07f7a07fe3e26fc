#include "toolchain/schedule_choice.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>

#include "backends/measure/records.h"
#include "frontend/partition/partition.h"
#include "scheduler/lower/lower_state.h"
#include "scheduler/sketch/random_program.h"
#include "scheduler/sketch/sketch_rule.h"
#include "scheduler/state/step.h"
#include "scheduler/tasks/workload_key.h"
#include "scheduler/te/analysis.h"

namespace kiln {

ScheduleChoice::Kind parse_schedule_kind(const std::string& s) {
  if (s == "default") return ScheduleChoice::Kind::Default;
  if (s == "random") return ScheduleChoice::Kind::Random;
  throw Error("--schedule '" + s + "': expected default or random");
}

ScheduleChoice::Kind schedule_kind_of_flags(const std::string& schedule, const std::string& records_path) {
  const ScheduleChoice::Kind kind = parse_schedule_kind(schedule);
  if (records_path.empty()) return kind;
  if (kind != ScheduleChoice::Kind::Default)
    throw Error("--records and --schedule " + schedule + " exclude each other (tasks without a record get the default schedule)");
  return ScheduleChoice::Kind::Records;
}

namespace {

bool wants(const ScheduleChoice& c, const std::string& step) {
  return std::find(c.dump_after.begin(), c.dump_after.end(), step) != c.dump_after.end() ||
         std::find(c.dump_after.begin(), c.dump_after.end(), "all") != c.dump_after.end();
}

// "Conv conv1" for each subgraph id: how a note names a task to a user, who knows the model's nodes
// and not workload keys. build_package partitions the same graph the same way, so the ids agree.
std::vector<std::string> subgraph_labels(const Graph& g) {
  std::vector<std::string> labels;
  for (const Subgraph& sg : partition_graph(g).subgraphs) {
    const int anchor = sg.anchor >= 0 ? sg.anchor : (sg.nodes.empty() ? -1 : sg.nodes.front());
    const std::string op = anchor >= 0 ? g.nodes[anchor].op_type : "?";
    const std::string first = sg.nodes.empty() ? "?" : g.nodes[sg.nodes.front()].name;
    labels.push_back(op + " " + first);
  }
  return labels;
}

// One program per task (workload key), so every occurrence of a layer runs the same code. A task
// whose program is nullopt runs the default schedule.
struct TaskScheduler {
  ScheduleChoice choice;
  sketch::SearchParams params;
  lower::ScheduleParams default_params;
  std::map<std::string, std::optional<state::State>> program_of_task;
  // Kind::Records: the best record per task key for this target, and the subgraphs' labels.
  std::map<std::string, measure::Record> best_record;
  std::vector<std::string> labels;
  std::set<std::string> noted;  // tasks that already printed a note

  void note(const std::string& key, const std::string& line) {
    if (!noted.insert(key).second) return;
    if (choice.on_note) choice.on_note(line);
    else std::cerr << line << "\n";
  }

  void note_no_replay(const std::string& key, const std::string& why) {
    note(key, fmt::format("kiln: note: record for task {} does not replay ({}): default schedule", key, why));
  }

  // The recorded program of a task on its first occurrence's DAG, or nullopt (with a note).
  std::optional<state::State> recorded_program(const std::string& key, const std::shared_ptr<const te::ComputeDAG>& dag,
                                               int id) {
    auto it = best_record.find(key);
    if (it == best_record.end()) {
      const std::string label = id >= 0 && static_cast<size_t>(id) < labels.size() ? labels[id] : "subgraph " + std::to_string(id);
      note(key, fmt::format("kiln: note: no tuning record for task {} ({}): default schedule", key, label));
      return std::nullopt;
    }
    if (it->second.default_schedule) return std::nullopt;  // measured faster than every tuned program
    try {
      return measure::replay_record(it->second, dag);
    } catch (const Error& e) {
      note_no_replay(key, e.what());
      return std::nullopt;
    }
  }

  lower::Stmt operator()(const LoweredSubgraph& sg, int id, const std::map<const te::TensorNode*, lower::BufferRef>& buffers,
                         std::vector<lower::BufferRef>& temps) {
    const std::string key = workload_key(sg.dag);
    auto it = program_of_task.find(key);
    if (it == program_of_task.end()) {
      auto dag = std::make_shared<const te::ComputeDAG>(sg.dag);
      state::State initial(dag);
      const std::string head = fmt::format("task {} (subgraph {})\n", key, id);
      if (wants(choice, "analysis") && choice.on_dump) choice.on_dump("analysis", head + te::print_analysis(*dag));
      std::vector<state::State> sketches;
      if (choice.kind == ScheduleChoice::Kind::Random || wants(choice, "sketch")) sketches = sketch::generate_sketches(initial, params);
      if (wants(choice, "sketch") && choice.on_dump) {
        std::string text = head;
        for (size_t k = 0; k < sketches.size(); ++k)
          text += fmt::format("sketch {}:\n{}{}", k, state::print_steps(sketches[k]), state::print_state(sketches[k]));
        choice.on_dump("sketch", text);
      }
      std::optional<state::State> program;
      if (choice.kind == ScheduleChoice::Kind::Random) {
        sketch::Rng rng(choice.seed * 0x9E3779B97F4A7C15ull ^ std::hash<std::string>{}(key));
        program = sketch::sample_program(sketches, params, rng);
      } else if (choice.kind == ScheduleChoice::Kind::Records) {
        program = recorded_program(key, dag, id);
      }
      if (program && wants(choice, "schedule") && choice.on_dump)
        choice.on_dump("schedule", head + state::print_steps(*program) + state::print_state(*program));
      it = program_of_task.emplace(key, std::move(program)).first;
    }
    if (!it->second) return lower::lower_subgraph_default(sg, id, buffers, temps, default_params);
    // The stored program's DAG is the first occurrence's: replay its steps on this subgraph's DAG
    // (same workload key, so the same stages in the same order).
    auto dag = std::make_shared<const te::ComputeDAG>(sg.dag);
    state::State program;
    try {
      program = state::replay(dag, it->second->steps());
    } catch (const state::ScheduleError& e) {
      if (choice.kind == ScheduleChoice::Kind::Records) {  // a record is not redrawn: this occurrence runs the default
        note_no_replay(key, e.what());
        return lower::lower_subgraph_default(sg, id, buffers, temps, default_params);
      }
      sketch::Rng rng(choice.seed ^ static_cast<uint64_t>(id));  // stages ordered differently: draw for this occurrence
      program = sketch::sample_program(sketch::generate_sketches(state::State(dag), params), params, rng);
    }
    if (choice.kind != ScheduleChoice::Kind::Records) return lower::lower_state(program, buffers, temps);
    // A record may come from another kiln version or a hand edit: one that replays but does not lower
    // falls back like one that does not replay, dropping whatever temporaries the attempt added.
    const size_t temps_before = temps.size();
    try {
      return lower::lower_state(program, buffers, temps);
    } catch (const Error& e) {
      temps.erase(temps.begin() + static_cast<std::ptrdiff_t>(temps_before), temps.end());
      note_no_replay(key, std::string("lowering: ") + e.what());
      it->second.reset();
      return lower::lower_subgraph_default(sg, id, buffers, temps, default_params);
    }
  }
};

}  // namespace

lower::SubgraphScheduler make_subgraph_scheduler(const ScheduleChoice& choice, const CompileTarget& target,
                                                 const Graph& g) {
  if (choice.kind == ScheduleChoice::Kind::Default && choice.dump_after.empty()) return nullptr;
  auto s = std::make_shared<TaskScheduler>();
  s->choice = choice;
  s->params.cores = std::max(target.cores, 1);
  s->params.vector_lanes = std::max(target.vector_bits / 32, 1);
  s->default_params.vector_bits = target.vector_bits;
  if (choice.kind == ScheduleChoice::Kind::Records) {
    for (auto& [k, r] : measure::best_records(measure::load_records(choice.records_path)))
      if (k.second == target.name) s->best_record.emplace(k.first, std::move(r));
    s->labels = subgraph_labels(g);
  }
  return [s](const LoweredSubgraph& sg, int id, const std::map<const te::TensorNode*, lower::BufferRef>& buffers,
             std::vector<lower::BufferRef>& temps) { return (*s)(sg, id, buffers, temps); };
}

}  // namespace kiln
