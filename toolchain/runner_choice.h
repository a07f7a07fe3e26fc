/// \file `--runner local|rpc://HOST:PORT/KEY` and the timing options, shared by `kiln measure` and
/// `kiln tune`: one place turns them into a ProgramRunner.
#pragma once
#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "scheduler/measure/measure.h"
#include "scheduler/measure/program_runner.h"
#include "targets/target.h"

namespace kiln {

struct RunnerArgs {
  std::string runner = "local";
  std::string auth_key_file;  // rpc: the shared auth key (a secret; not the KEY in rpc://HOST:PORT/KEY)
  int number = 1, repeat = 3, min_repeat_ms = 0, parallel = 1;
  double timeout_s = 10;
  bool cache_flush = false;
  uint64_t seed = 0;

  /// `seed_flag` names the input-seed option (`kiln tune` keeps --seed for its search).
  void add_to(CLI::App* app, const std::string& seed_flag = "--seed");
  /// The runner; throws kiln::Error for a malformed --runner. `reference_builder` builds the default
  /// schedule that candidates' outputs are checked against.
  std::unique_ptr<measure::ProgramRunner> make(const Target& target, measure::Builder& reference_builder,
                                               int threads) const;
};

}  // namespace kiln
