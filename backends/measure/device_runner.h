/// \file What LocalRunner and RPCRunner share: turning built candidates into device runs, the
/// wrong-answer check against the default schedule, and mapping run failures to MeasureErrors. The two
/// runners differ only in where a run happens (a child process here, a server behind a tracker), so
/// they implement run_jobs() and inherit the rest.
///
/// The reference for a task is its DAG's initial State (the default schedule), built with the same
/// Builder and run once on the same kind of device with the same seed; its outputs are cached per
/// workload key for the life of the runner.
#pragma once
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/rpc/rpc_client.h"
#include "scheduler/measure/program_runner.h"

namespace kiln::measure {

/// One run for a device: the shared object on this machine and what to run in it (spec.module is
/// filled in by whoever uploads it).
struct DeviceJob {
  std::string so_path;
  rpc::RunSpec spec;
};

/// A job's result plus the wall time the job took, for MeasureResult::all_cost_s.
struct DeviceJobResult {
  rpc::RunResult run;
  double wall_s = 0;
};

class DeviceRunner : public ProgramRunner {
 public:
  /// `reference_builder` builds the default schedules; it must outlive the runner (the search's own
  /// builder, so references are built for the same target).
  DeviceRunner(Builder& reference_builder, RunnerOptions options);
  std::vector<MeasureResult> run(const std::vector<MeasureInput>& inputs,
                                 const std::vector<BuildResult>& builds) override;
  const RunnerOptions& options() const { return options_; }

 protected:
  /// Runs every job, result i for job i, in any order and on any device. Never throws: a lost device
  /// is a kConnection result.
  virtual std::vector<DeviceJobResult> run_jobs(const std::vector<DeviceJob>& jobs) = 0;

 private:
  struct Reference {
    std::string error;  // why there is no reference ("" when outputs are valid)
    std::vector<std::vector<uint8_t>> outputs;  // the output buffers, in parameter order
  };
  // Builds and runs the default schedule of every task in `inputs` not yet in the cache.
  void ensure_references(const std::vector<MeasureInput>& inputs, const std::vector<BuildResult>& builds);
  Builder& builder_;
  RunnerOptions options_;
  std::map<std::string, Reference> references_;
  std::string reference_failure_;  // why the last reference run that failed did (it is asked again later)
};

/// The device run of a build with the runner's timing knobs.
rpc::RunSpec run_spec_for(const BuildResult& build, const RunnerOptions& o);

/// Runs a job on an open session, uploading its shared object first unless `uploaded` (so path ->
/// module id, per session) has it. Never throws.
DeviceJobResult run_job_on_session(rpc::Session& session, std::map<std::string, uint32_t>& uploaded,
                                   const DeviceJob& job);

/// Seconds since the epoch, for MeasureResult::timestamp.
double unix_now();

}  // namespace kiln::measure
