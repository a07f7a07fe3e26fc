#include "toolchain/schedule_choice.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>

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

namespace {

bool wants(const ScheduleChoice& c, const std::string& step) {
  return std::find(c.dump_after.begin(), c.dump_after.end(), step) != c.dump_after.end() ||
         std::find(c.dump_after.begin(), c.dump_after.end(), "all") != c.dump_after.end();
}

// One program per task (workload key), so every occurrence of a layer runs the same code.
struct RandomScheduler {
  ScheduleChoice choice;
  sketch::SearchParams params;
  lower::ScheduleParams default_params;
  std::map<std::string, state::State> program_of_task;

  lower::Stmt operator()(const LoweredSubgraph& sg, int id, const std::map<const te::TensorNode*, lower::BufferRef>& buffers,
                  std::vector<lower::BufferRef>& temps) {
    const std::string key = workload_key(sg.dag);
    auto it = program_of_task.find(key);
    const bool first = it == program_of_task.end();
    if (first) {
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
      state::State program = initial;
      if (choice.kind == ScheduleChoice::Kind::Random) {
        sketch::Rng rng(choice.seed * 0x9E3779B97F4A7C15ull ^ std::hash<std::string>{}(key));
        program = sketch::sample_program(sketches, params, rng);
        if (wants(choice, "schedule") && choice.on_dump)
          choice.on_dump("schedule", head + state::print_steps(program) + state::print_state(program));
      }
      it = program_of_task.emplace(key, program).first;
    }
    if (choice.kind == ScheduleChoice::Kind::Default) return lower::lower_subgraph_default(sg, id, buffers, temps, default_params);
    // The stored program's DAG is the first occurrence's: replay its steps on this subgraph's DAG
    // (same workload key, so the same stages in the same order).
    auto dag = std::make_shared<const te::ComputeDAG>(sg.dag);
    state::State program;
    try {
      program = state::replay(dag, it->second.steps());
    } catch (const state::ScheduleError&) {  // stages ordered differently: draw for this occurrence
      sketch::Rng rng(choice.seed ^ static_cast<uint64_t>(id));
      program = sketch::sample_program(sketch::generate_sketches(state::State(dag), params), params, rng);
    }
    return lower::lower_state(program, buffers, temps);
  }
};

}  // namespace

lower::SubgraphScheduler make_subgraph_scheduler(const ScheduleChoice& choice, const CompileTarget& target) {
  if (choice.kind == ScheduleChoice::Kind::Default && choice.dump_after.empty()) return nullptr;
  auto s = std::make_shared<RandomScheduler>();
  s->choice = choice;
  s->params.cores = std::max(target.cores, 1);
  s->params.vector_lanes = std::max(target.vector_bits / 32, 1);
  s->default_params.vector_bits = target.vector_bits;
  return [s](const LoweredSubgraph& sg, int id, const std::map<const te::TensorNode*, lower::BufferRef>& buffers,
             std::vector<lower::BufferRef>& temps) { return (*s)(sg, id, buffers, temps); };
}

}  // namespace kiln
