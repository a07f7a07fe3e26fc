/// \file The measurement builder: a batch of candidate states -> fully linked shared objects for the
/// target, ready to upload to a device server or load in a local runner process.
///
/// It lives in backends/ (not scheduler/measure/ beside its vocabulary) because compiling a candidate
/// needs LLVM code generation, and the scheduler must not depend on backends; the search holds it as a
/// measure::Builder.
///
/// Each candidate builds in a forked worker process: a candidate that crashes LLVM, or takes too long,
/// costs one error result instead of the tuner. A worker lowers the state (a ScheduleError is an
/// Instantiation error), emits an object file for the target machine (CompileHost), links it with the
/// target's C compiler (`<cc> -shared`, e.g. aarch64-linux-gnu-gcc for a board, so boards need no
/// compiler; CompileHost) and reports its BuildResult as JSON through a pipe. Workers that exceed the
/// time limit are killed with their compiler (BuildTimeout); one that dies otherwise is Unknown.
///
/// Workers are forked, not exec'd: the candidate's state and DAG reach them for free. Call build() from a
/// thread while no other thread of the process is inside LLVM (a fork copies locks in whatever state
/// other threads left them).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "scheduler/measure/measure.h"
#include "targets/target.h"

namespace kiln::measure {

struct BuilderOptions {
  int n_parallel = 0;       ///< workers at once; 0 = the cores of this machine
  double timeout_s = 15;    ///< per candidate, from fork to the worker's result
  /// Where the objects and shared objects go. Empty: a fresh directory under the system temp dir,
  /// which the builder removes when it goes (so results must be used while the builder lives).
  std::string build_dir;
  std::string func_name = "kiln_program";  ///< the symbol every shared object exports
  /// Runs in the worker before it builds candidate `index`. A test hook: it simulates a worker that
  /// crashes or hangs, which no valid input can do on purpose.
  std::function<void(size_t index)> in_worker;
};

class ProgramBuilder : public Builder {
 public:
  /// Throws kiln::Error when LLVM cannot make a machine for the target's triple/cpu (a broken target
  /// file fails here once rather than in every candidate).
  explicit ProgramBuilder(Target target, BuilderOptions options = {});
  ~ProgramBuilder() override;
  ProgramBuilder(const ProgramBuilder&) = delete;
  ProgramBuilder& operator=(const ProgramBuilder&) = delete;

  /// Builds every input, at most n_parallel at once; results in input order, errors as results.
  /// File names carry a batch number, so the shared objects of earlier batches stay valid.
  std::vector<BuildResult> build(const std::vector<MeasureInput>& inputs) override;

  const std::string& build_dir() const { return dir_; }
  const Target& target() const { return target_; }

 private:
  Target target_;
  BuilderOptions options_;
  std::string dir_;
  bool owns_dir_ = false;
  int batch_ = 0;
};

/// Builds one candidate in this process, writing `<stem>.o` and `<stem>.so`. What a builder worker
/// runs; exposed so that a failure can be reproduced under a debugger. Never throws.
BuildResult build_candidate(const MeasureInput& input, const Target& target, const std::string& stem,
                            const std::string& func_name);

}  // namespace kiln::measure
