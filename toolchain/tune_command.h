/// \file `kiln tune MODEL.onnx... --target T --records R --trials N`: tunes every task of the models
/// (tasks shared between models are tuned once) and appends every measured program to R. Run again on
/// the same records it resumes; `kiln compile --records R` then builds the tuned package.
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "toolchain/cli_bindings.h"
#include "toolchain/runner_choice.h"

namespace kiln {

class TuneCommand {
 public:
  explicit TuneCommand(CLI::App& app);
  /// Runs the command when it was given and returns its exit code, or -1 when it was not given.
  /// Throws kiln::Error for a model, target, runner or records file it cannot use.
  int run();

 private:
  CLI::App* cmd_;
  std::vector<std::string> models_;
  std::string target_, records_, curve_, strategy_ = "gradient", cost_model_ = "xgboost";
  int trials_ = 1000, trials_per_task_ = 0, early_stopping_ = -1, threads_ = 0, per_round_ = 64, population_ = 2048;
  int finalists_ = 3, database_samples_ = 4096;
  double peak_gflops_ = 0, bandwidth_gbs_ = 0;
  double device_wait_s_ = 600;
  std::string database_;
  uint64_t seed_ = 0;
  double build_timeout_s_ = 15;
  bool plain_ = false;
  bool substitutions_ = false;
  BindingArgs bindings_;
  RunnerArgs runner_;
};

}  // namespace kiln
