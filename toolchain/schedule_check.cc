#include "toolchain/schedule_check.h"

#include <fmt/format.h>
#include <llvm/TargetParser/Host.h>

#include <cmath>
#include <cstring>
#include <atomic>
#include <random>
#include <thread>

#include "backends/llvm/jit.h"
#include "backends/measure/records.h"
#include "frontend/partition/partition.h"
#include "scheduler/lower/bounds_check.h"
#include "scheduler/lower/lower_state.h"
#include "scheduler/sketch/random_program.h"
#include "scheduler/sketch/sketch_rule.h"
#include "scheduler/state/step.h"
#include "scheduler/te/te_eval.h"
#include "toolchain/pipeline.h"

namespace kiln {
namespace {

Tensor random_tensor(const te::TensorRef& p, std::mt19937_64& rng) {
  if (p->constant) return *p->constant;
  Tensor t(p->dtype, p->shape);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  std::uniform_int_distribution<int> small(0, 2);
  for (int64_t i = 0; i < num_elements(p->shape); ++i) {
    if (is_float(p->dtype)) t.set_double(i, real(rng));
    else t.set_int(i, p->dtype == DType::Bool ? small(rng) % 2 : small(rng));
  }
  return t;
}

bool close(double got, double want, double rtol, double atol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= atol + rtol * std::fabs(want);
}

// Runs the program on `inputs`; returns "" when every output matches `want`, else what differs.
std::string run_and_compare(const state::State& s, const std::vector<Tensor>& inputs, const std::vector<Tensor>& want,
                            const ScheduleCheckOptions& o) {
  lower::LoweredFunc f = lower::lower_state_func(s, "program");
  lower::check_bounds(f);  // a program that may leave a buffer is refused, not run
  const te::ComputeDAG& dag = s.dag();
  std::vector<std::vector<std::byte>> memory;
  std::vector<void*> ptrs;
  for (const lower::BufferRef& b : f.params) {
    memory.emplace_back(static_cast<size_t>(std::max<int64_t>(b->size, 1)) * std::max<size_t>(dtype_size(b->dtype), 1) + 64);
    ptrs.push_back(memory.back().data());
  }
  for (size_t i = 0; i < dag.placeholders.size(); ++i) std::memcpy(ptrs[i], inputs[i].data(), inputs[i].byte_size());
  llvm_backend::JitFunction jit(f, o.optimize);
  jit.run(ptrs);
  // Outputs follow the placeholders in lower_state_func's parameters (a repeated output once).
  std::map<const te::TensorNode*, size_t> param_of;
  for (size_t i = 0, p = dag.placeholders.size(); i < dag.outputs.size(); ++i)
    if (!param_of.count(dag.outputs[i].get())) param_of[dag.outputs[i].get()] = p++;
  for (size_t i = 0; i < dag.outputs.size(); ++i) {
    const te::TensorRef& out = dag.outputs[i];
    Tensor got(out->dtype, out->shape);
    std::memcpy(got.data(), ptrs[param_of[out.get()]], got.byte_size());
    // How many elements differ and by how much tells a lowering bug (a few positions, large
    // differences) from float rounding (scattered, near the tolerance).
    int64_t first = -1, differing = 0;
    double worst = 0;
    for (int64_t e = 0; e < num_elements(out->shape); ++e) {
      const double g = got.get_double(e), w = want[i].get_double(e);
      if (close(g, w, o.rtol, o.atol)) continue;
      if (first < 0) first = e;
      ++differing;
      worst = std::max(worst, std::fabs(g - w));
    }
    if (first >= 0)
      return fmt::format("output {}: {} of {} elements differ, first {} (got {}, want {}), largest difference {}",
                         out->name, differing, num_elements(out->shape), first, got.get_double(first),
                         want[i].get_double(first), worst);
  }
  return "";
}

std::string steps_json(const state::State& s) {
  nlohmann::json j = nlohmann::json::array();
  for (const state::StepRef& st : s.steps()) j.push_back(st->to_json());
  return j.dump();
}

// A program to check: its state, or why there is none; `label` names it in a failure line.
struct Program {
  std::string label;
  state::State state;
  std::string error;
  std::string refused;  // why the bounds check refused it
};

using ProgramSource = std::function<std::vector<Program>(const std::shared_ptr<const te::ComputeDAG>& dag,
                                                         const std::vector<state::State>& sketches, std::mt19937_64& rng)>;

// Evaluates the task's DAG once on random inputs, then compiles and runs the programs `source` gives
// on every core and compares each with the evaluation.
TaskScheduleCheck check_programs(const Task& task, const ScheduleCheckOptions& o, const ProgramSource& source) {
  TaskScheduleCheck r;
  r.key = task.key;
  r.anchor = task.anchor;
  for (const te::TensorRef& t : task.dag.tensors)
    if (t->stage->is_extern()) {
      r.skipped = "runtime kernel " + t->stage->extern_node->op_type;
      return r;
    }
  auto dag = std::make_shared<const te::ComputeDAG>(task.dag);
  state::State initial(dag);
  std::vector<state::State> sketches = sketch::generate_sketches(initial, o.params);
  r.sketches = static_cast<int>(sketches.size());
  std::mt19937_64 rng(o.seed ^ std::hash<std::string>{}(task.key));
  std::vector<Tensor> inputs;
  std::map<const te::TensorNode*, Tensor> by_node;
  for (const te::TensorRef& p : dag->placeholders) {
    inputs.push_back(random_tensor(p, rng));
    if (!p->constant) by_node[p.get()] = inputs.back();
  }
  std::vector<Program> programs = source(dag, sketches, rng);
  if (programs.empty()) return r;
  std::vector<Tensor> want = te::evaluate(*dag, by_node);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next++) < programs.size();) {
      if (!programs[i].state.valid()) continue;
      try {
        programs[i].error = run_and_compare(programs[i].state, inputs, want, o);
      } catch (const lower::BoundsError& e) {
        programs[i].refused = e.what();
      } catch (const Error& e) {
        programs[i].error = e.what();
      }
    }
  };
  std::vector<std::thread> threads;
  const unsigned n = std::max(1u, std::min(std::thread::hardware_concurrency(), static_cast<unsigned>(programs.size())));
  for (unsigned t = 1; t < n; ++t) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < programs.size(); ++i) {
    const Program& p = programs[i];
    ++r.programs;
    if (!p.refused.empty()) {
      ++r.refused;
      r.refusals.push_back(fmt::format("{}: {} | steps {}", p.label.empty() ? fmt::format("program {}", i) : p.label,
                                       p.refused, steps_json(p.state)));
    } else if (p.error.empty()) ++r.passed;
    else
      r.failures.push_back(fmt::format("{}: {} | steps {}", p.label.empty() ? fmt::format("program {}", i) : p.label,
                                       p.error, p.state.valid() ? steps_json(p.state) : "-"));
  }
  return r;
}

}  // namespace

TaskScheduleCheck check_task_schedules(const Task& task, const ScheduleCheckOptions& o) {
  return check_programs(task, o, [&](const auto&, const std::vector<state::State>& sketches, std::mt19937_64& rng) {
    // Programs are drawn in order, so the seed fixes them.
    std::vector<Program> programs(static_cast<size_t>(std::max(o.programs, 0)));
    for (Program& p : programs) {
      try {
        p.state = sketch::sample_program(sketches, o.params, rng);
      } catch (const Error& e) {
        p.error = e.what();
      }
    }
    return programs;
  });
}

TaskScheduleCheck check_task_records(const Task& task, const std::vector<measure::Record>& records,
                                     const ScheduleCheckOptions& o) {
  return check_programs(task, o, [&](const auto& dag, const std::vector<state::State>&, std::mt19937_64&) {
    std::vector<Program> programs;
    for (size_t i = 0; i < records.size(); ++i) {
      const measure::Record& r = records[i];
      if (r.task_key != task.key) continue;
      Program& p = programs.emplace_back();
      p.label = fmt::format("record {} ({}{})", i + 1, r.default_schedule ? "default, " : "",
                            measure::measure_error_name(r.result.error));
      try {
        p.state = measure::replay_record(r, dag);
      } catch (const std::exception& e) {
        p.error = std::string("does not replay: ") + e.what();
      }
    }
    return programs;
  });
}

std::vector<TaskScheduleCheck> check_model_schedules(const Graph& g, const ScheduleCheckOptions& o,
                                                     const std::function<void(const TaskScheduleCheck&)>& on_task) {
  std::vector<TaskScheduleCheck> out;
  const std::vector<measure::Record> records = o.records.empty() ? std::vector<measure::Record>{} : measure::load_records(o.records);
  // The programs run on this machine (the JIT): its layout (float lanes, and its int8 rule).
  const LayoutTarget here = layout_target(32 * o.params.vector_lanes, llvm::sys::getProcessTriple(), llvm_backend::jit_host_features());
  for (const Task& t : target_tasks(g, here)) {
    out.push_back(records.empty() ? check_task_schedules(t, o) : check_task_records(t, records, o));
    if (on_task) on_task(out.back());
  }
  return out;
}

}  // namespace kiln
