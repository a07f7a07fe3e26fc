/// \file `kiln measure RECORDS --target T --runner local|rpc://H:P/KEY --model M.onnx`: re-measures the
/// schedules of a records file and prints a table, so a user can compare boards or check old records.
///
/// A record names its task only by workload key; the DAG it replays on comes from the models given
/// with --model (their tasks are extracted and matched by key). Kept out of main.cc like the RPC
/// commands, so the driver stays a table of commands.
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "toolchain/runner_choice.h"

namespace kiln {

/// The subcommand and its parsed options; construct before parsing, run() after.
class MeasureCommand {
 public:
  explicit MeasureCommand(CLI::App& app);
  /// Runs the command when it was given and returns its exit code (0, or 1 when a record failed to
  /// measure), or -1 when it was not given. Throws kiln::Error for a malformed records file (naming
  /// the file and line), an unknown task key, an unknown target or runner.
  int run();

 private:
  CLI::App* cmd_;
  std::string records_, target_;
  std::vector<std::string> models_;
  RunnerArgs runner_;
};

}  // namespace kiln
