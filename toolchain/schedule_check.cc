#include "toolchain/schedule_check.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <atomic>
#include <random>
#include <thread>

#include "backends/llvm/jit.h"
#include "frontend/partition/partition.h"
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
    for (int64_t e = 0; e < num_elements(out->shape); ++e)
      if (!close(got.get_double(e), want[i].get_double(e), o.rtol, o.atol))
        return fmt::format("output {} element {}: got {}, want {}", out->name, e, got.get_double(e), want[i].get_double(e));
  }
  return "";
}

std::string steps_json(const state::State& s) {
  nlohmann::json j = nlohmann::json::array();
  for (const state::StepRef& st : s.steps()) j.push_back(st->to_json());
  return j.dump();
}

}  // namespace

TaskScheduleCheck check_task_schedules(const Task& task, const ScheduleCheckOptions& o) {
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
  std::vector<Tensor> want = te::evaluate(*dag, by_node);
  // Programs are drawn in order (the seed fixes them), then compiled and run on every core.
  std::vector<state::State> programs(static_cast<size_t>(std::max(o.programs, 0)));
  std::vector<std::string> errors(programs.size());
  for (size_t i = 0; i < programs.size(); ++i) {
    try {
      programs[i] = sketch::sample_program(sketches, o.params, rng);
    } catch (const Error& e) {
      errors[i] = e.what();
    }
  }
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next++) < programs.size();) {
      if (!programs[i].valid()) continue;
      try {
        errors[i] = run_and_compare(programs[i], inputs, want, o);
      } catch (const Error& e) {
        errors[i] = e.what();
      }
    }
  };
  std::vector<std::thread> threads;
  const unsigned n = std::max(1u, std::min(std::thread::hardware_concurrency(), static_cast<unsigned>(programs.size())));
  for (unsigned t = 1; t < n; ++t) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < programs.size(); ++i) {
    ++r.programs;
    if (errors[i].empty()) ++r.passed;
    else r.failures.push_back(fmt::format("program {}: {} | steps {}", i, errors[i], programs[i].valid() ? steps_json(programs[i]) : "-"));
  }
  return r;
}

std::vector<TaskScheduleCheck> check_model_schedules(const Graph& g, const ScheduleCheckOptions& o,
                                                     const std::function<void(const TaskScheduleCheck&)>& on_task) {
  std::vector<TaskScheduleCheck> out;
  for (const Task& t : extract_tasks(g, partition_graph(g))) {
    out.push_back(check_task_schedules(t, o));
    if (on_task) on_task(out.back());
  }
  return out;
}

}  // namespace kiln
