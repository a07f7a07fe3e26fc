/// \file `kiln records distill R -o R2` and `kiln records show R`: the tools that keep a tuning log
/// usable once it has grown. A log holds every candidate ever measured; a shipped model needs only the
/// best schedule per (task, target), and a user needs to see at a glance what a log covers. Kept out of
/// main.cc like `kiln measure`, so the driver stays a table of commands.
#pragma once
#include <CLI/CLI.hpp>

#include <string>

namespace kiln {

/// The `records` subcommand with its two actions; construct before parsing, run() after.
class RecordsCommand {
 public:
  explicit RecordsCommand(CLI::App& app);
  /// Runs the action when `records` was given and returns its exit code (0), or -1 when it was not
  /// given. Throws kiln::Error naming the file for a missing or unreadable records file or an output
  /// that cannot be written.
  int run();

 private:
  CLI::App* cmd_;
  CLI::App* distill_;
  CLI::App* show_;
  std::string distill_in_, distill_out_, show_in_;
};

}  // namespace kiln
