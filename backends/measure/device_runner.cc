// The shared half of the runners: reference outputs per task, candidate runs, the wrong-answer check.
#include "backends/measure/device_runner.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <fmt/format.h>
#include <set>

#include "frontend/ir/error.h"
#include "scheduler/state/state.h"

namespace kiln::measure {
namespace {

rpc::DType wire_dtype(DType t) {
  switch (t) {
    case DType::Float32: return rpc::DType::kF32;
    case DType::Float64: return rpc::DType::kF64;
    case DType::Int32: case DType::UInt32: return rpc::DType::kI32;
    case DType::Int64: case DType::UInt64: return rpc::DType::kI64;
    case DType::Bool: return rpc::DType::kBool;
    default: return rpc::DType::kU8;  // small non-negative bytes are valid data for every other type
  }
}

MeasureError error_of(rpc::RunError e) {
  switch (e) {
    case rpc::RunError::kNone: return MeasureError::None;
    case rpc::RunError::kRunTimeout: return MeasureError::RunTimeout;
    case rpc::RunError::kConnection:
    case rpc::RunError::kSessionTimeout: return MeasureError::DeviceLost;  // not the program's doing
    default: return MeasureError::RuntimeDevice;  // a crash, or a request the server refused
  }
}

// The reference run only needs outputs: one call, no timing.
rpc::RunSpec reference_spec(const BuildResult& build, const RunnerOptions& o) {
  rpc::RunSpec s = run_spec_for(build, o);
  s.number = 1;
  s.repeat = 1;
  s.min_repeat_ms = 0;
  s.cache_flush = false;
  // The default schedule can be far slower than the candidates the runner's timeout is meant for.
  s.run_timeout_ms = std::max<uint32_t>(s.run_timeout_ms, 120000);
  return s;
}

}  // namespace

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

rpc::RunSpec run_spec_for(const BuildResult& build, const RunnerOptions& o) {
  rpc::RunSpec s;
  s.func = build.func_name;
  for (const BufferSpec& b : build.buffers)
    s.buffers.push_back({static_cast<uint64_t>(b.bytes), wire_dtype(b.dtype), b.role == BufferRole::Input,
                         b.role == BufferRole::Output});
  s.seed = o.seed;
  s.number = static_cast<uint32_t>(std::max(o.number, 1));
  s.repeat = static_cast<uint32_t>(std::max(o.repeat, 1));
  s.min_repeat_ms = static_cast<uint32_t>(std::max(o.min_repeat_ms, 0));
  s.cache_flush = o.cache_flush;
  s.run_timeout_ms = static_cast<uint32_t>(std::max(o.timeout_s, 0.001) * 1000);
  s.threads = static_cast<uint16_t>(std::clamp(o.threads, 1, static_cast<int>(rpc::kMaxRunThreads)));
  return s;
}

DeviceJobResult run_job_on_session(rpc::Session& session, std::map<std::string, uint32_t>& uploaded,
                                   const DeviceJob& job) {
  const auto start = std::chrono::steady_clock::now();
  DeviceJobResult r;
  rpc::RunSpec spec = job.spec;
  auto it = uploaded.find(job.so_path);
  if (it == uploaded.end()) {
    rpc::Expected<uint32_t> id = session.upload_file(job.so_path);
    if (!id.ok()) {
      const rpc::ClientError& e = id.error();
      r.run.error = e.kind == rpc::ClientError::kRejected ? rpc::RunError::kRejected : rpc::RunError::kConnection;
      r.run.message = "upload of " + job.so_path + " failed: " + e.message;
      r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return r;
    }
    it = uploaded.emplace(job.so_path, id.value()).first;
  }
  spec.module = it->second;
  r.run = session.run(spec);
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

DeviceRunner::DeviceRunner(Builder& reference_builder, RunnerOptions options)
    : builder_(reference_builder), options_(options) {}

void DeviceRunner::ensure_references(const std::vector<MeasureInput>& inputs, const std::vector<BuildResult>& builds) {
  std::vector<MeasureInput> defaults;
  std::set<std::string> seen;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string& key = inputs[i].task_key;
    if (builds[i].error != MeasureError::None || references_.count(key) || !seen.insert(key).second) continue;
    defaults.push_back({key, inputs[i].dag, state::State(inputs[i].dag)});
  }
  if (defaults.empty()) return;
  const std::vector<BuildResult> built = builder_.build(defaults);
  std::vector<DeviceJob> jobs;
  std::vector<size_t> job_of;
  for (size_t i = 0; i < defaults.size(); ++i) {
    if (built[i].error != MeasureError::None) {
      // Deterministic: the default schedule of this task does not build for this target.
      references_[defaults[i].task_key].error = fmt::format("the default schedule did not build ({}): {}",
                                                            measure_error_name(built[i].error), built[i].error_msg);
      continue;
    }
    jobs.push_back({built[i].so_path, reference_spec(built[i], options_)});
    job_of.push_back(i);
  }
  const std::vector<DeviceJobResult> ran = run_jobs(jobs);
  for (size_t j = 0; j < jobs.size(); ++j) {
    const BuildResult& b = built[job_of[j]];
    const rpc::RunResult& r = ran[j].run;
    // A failed reference run is not cached: the device may have gone away, a later batch retries.
    if (r.error != rpc::RunError::kNone) {
      reference_failure_ = std::string(rpc::run_error_name(r.error)) + ": " + r.message;
      continue;
    }
    Reference ref;
    for (size_t k = 0; k < b.buffers.size(); ++k)
      if (b.buffers[k].role == BufferRole::Output) ref.outputs.push_back(k < r.outputs.size() ? r.outputs[k] : std::vector<uint8_t>{});
    references_[defaults[job_of[j]].task_key] = std::move(ref);
  }
}

std::vector<MeasureResult> DeviceRunner::run(const std::vector<MeasureInput>& inputs,
                                             const std::vector<BuildResult>& builds) {
  if (inputs.size() != builds.size())
    throw Error(fmt::format("measure: {} inputs but {} build results", inputs.size(), builds.size()));
  std::vector<MeasureResult> results(inputs.size());
  if (options_.check_outputs) ensure_references(inputs, builds);
  std::vector<DeviceJob> jobs;
  std::vector<size_t> job_of;
  for (size_t i = 0; i < inputs.size(); ++i) {
    MeasureResult& m = results[i];
    m.all_cost_s = builds[i].time_s;
    if (builds[i].error != MeasureError::None) {
      m.error = builds[i].error;
      m.error_msg = builds[i].error_msg;
      continue;
    }
    if (options_.check_outputs) {
      auto ref = references_.find(inputs[i].task_key);
      if (ref == references_.end() || !ref->second.error.empty()) {
        // No reference run came back (the device went away): ask again later. One that did not build
        // never will.
        m.error = ref == references_.end() ? MeasureError::DeviceLost : MeasureError::RuntimeDevice;
        m.error_msg = ref == references_.end() ? "no reference: the default schedule did not run on the device" +
                                                     (reference_failure_.empty() ? "" : " (" + reference_failure_ + ")")
                                               : "no reference: " + ref->second.error;
        continue;
      }
    }
    jobs.push_back({builds[i].so_path, run_spec_for(builds[i], options_)});
    const double slow = inputs[i].slow_call_s;
    jobs.back().spec.slow_call_ms = static_cast<uint32_t>(std::clamp(slow * 1000, 0.0, 4e9));
    // A first call that takes many times the cutoff is not worth waiting for: it times out early.
    if (slow > 0 && std::isfinite(slow))
      jobs.back().spec.run_timeout_ms = std::min<uint32_t>(
          jobs.back().spec.run_timeout_ms, static_cast<uint32_t>(std::clamp(slow * 4000 + 1000, 0.0, 4e9)));
    job_of.push_back(i);
  }
  const std::vector<DeviceJobResult> ran = run_jobs(jobs);
  for (size_t j = 0; j < jobs.size(); ++j) {
    const size_t i = job_of[j];
    MeasureResult& m = results[i];
    const rpc::RunResult& r = ran[j].run;
    m.all_cost_s += ran[j].wall_s;
    m.timestamp = unix_now();
    if (r.error != rpc::RunError::kNone) {
      m.error = error_of(r.error);
      m.error_msg = std::string(rpc::run_error_name(r.error)) + ": " + r.message;
      continue;
    }
    if (options_.check_outputs) {
      const Reference& ref = references_.at(inputs[i].task_key);
      size_t out = 0;
      for (size_t k = 0; k < builds[i].buffers.size() && m.error == MeasureError::None; ++k) {
        const BufferSpec& b = builds[i].buffers[k];
        if (b.role != BufferRole::Output) continue;
        static const std::vector<uint8_t> none;
        const std::vector<uint8_t>& got = k < r.outputs.size() ? r.outputs[k] : none;
        std::string why = out < ref.outputs.size() ? compare_output(b.name, b.dtype, got, ref.outputs[out])
                                                   : "output " + b.name + " has no counterpart in the default schedule";
        ++out;
        if (!why.empty()) {
          m.error = MeasureError::WrongAnswer;
          m.error_msg = why;
        }
      }
      if (m.error != MeasureError::None) continue;
    }
    m.costs = r.costs;
  }
  for (MeasureResult& m : results)
    if (m.timestamp == 0) m.timestamp = unix_now();
  return results;
}

}  // namespace kiln::measure
