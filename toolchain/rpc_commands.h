/// \file The driver's RPC commands: `kiln rpc-server`, `kiln tracker` and `kiln rpc status`.
///
/// They are thin: options parsed with CLI11 into runtime/rpc's option structs, then the same server
/// and tracker code the standalone kiln-rpc-server runs. Kept out of main.cc so the driver stays a
/// table of commands.
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "runtime/rpc/rpc_server.h"
#include "runtime/rpc/tracker.h"

namespace kiln {

/// The three subcommands and their parsed options; construct before parsing, run() after.
class RpcCommands {
 public:
  explicit RpcCommands(CLI::App& app);
  /// Runs whichever RPC subcommand was given and returns its exit code, or -1 when none was. Throws
  /// kiln::Error for bad arguments and unreachable trackers.
  int run();

 private:
  CLI::App* server_cmd_;
  CLI::App* tracker_cmd_;
  CLI::App* rpc_cmd_;
  CLI::App* status_cmd_;
  rpc::ServerOptions server_;
  rpc::TrackerOptions tracker_;
  std::string status_tracker_, status_auth_key_file_;
};

}  // namespace kiln
