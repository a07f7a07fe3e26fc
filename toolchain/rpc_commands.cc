// kiln rpc-server / tracker / rpc status: CLI11 options in, runtime/rpc calls out.
#include "toolchain/rpc_commands.h"

#include <iostream>

#include "frontend/ir/error.h"
#include "runtime/rpc/auth_key.h"
#include "runtime/rpc/net.h"
#include "runtime/rpc/rpc_client.h"

namespace kiln {

RpcCommands::RpcCommands(CLI::App& app) {
  server_cmd_ = app.add_subcommand("rpc-server", "Serve measurement requests on this machine (a board)");
  server_cmd_->add_option("--port", server_.port, "Port to listen on (0: any free port, printed)")->capture_default_str();
  server_cmd_->add_option("--host", server_.host, "Address to listen on (not loopback: needs an auth key)")
      ->capture_default_str();
  server_cmd_->add_option("--tracker", server_.tracker, "Register with the tracker at HOST:PORT");
  server_cmd_->add_option("--key", server_.key, "Device key to register under (e.g. rk3588)");
  server_cmd_->add_option("--advertise-host", server_.advertise_host,
                          "Address the tracker hands to clients (default: as the tracker sees this server)");
  server_cmd_->add_option("--auth-key-file", server_.auth_key_file,
                          "File holding the shared auth key (mode 600; default: $KILN_RPC_AUTH_KEY)");
  server_cmd_->add_option("--handshake-timeout", server_.handshake_timeout_ms, "Milliseconds a connection may take to authenticate")
      ->check(CLI::Range(1, 600000))
      ->capture_default_str();
  server_cmd_->add_option("--session-timeout", server_.session_timeout_ms, "Idle milliseconds before a session closes")
      ->check(CLI::Range(1, 86400000))
      ->capture_default_str();
  server_cmd_->add_option("--max-run-timeout", server_.max_run_timeout_ms, "Upper bound of clients' run timeouts (ms)")
      ->check(CLI::Range(1, 86400000))
      ->capture_default_str();
  server_cmd_->add_option("--work-dir", server_.work_dir, "Parent of the per-session upload dirs (default: $TMPDIR)");
  server_cmd_->add_flag("-v,--verbose", server_.verbose, "Log every session event on stderr");

  tracker_cmd_ = app.add_subcommand("tracker", "Keep a pool of device servers by key for tuners");
  tracker_cmd_->add_option("--port", tracker_.port, "Port to listen on (0: any free port, printed)")->capture_default_str();
  tracker_cmd_->add_option("--host", tracker_.host, "Address to listen on (not loopback: needs an auth key)")
      ->capture_default_str();
  tracker_cmd_->add_option("--auth-key-file", tracker_.auth_key_file,
                           "File holding the shared auth key (mode 600; default: $KILN_RPC_AUTH_KEY)");
  tracker_cmd_->add_option("--lease-timeout", tracker_.lease_timeout_ms,
                           "Milliseconds after which a lease not released returns its server to the pool")
      ->check(CLI::Range(100, 86400000))
      ->capture_default_str();
  tracker_cmd_->add_option("--max-pending", tracker_.max_pending, "Queued requests before REQUEST is answered busy")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  tracker_cmd_->add_option("--handshake-timeout", tracker_.handshake_timeout_ms,
                           "Milliseconds a connection may take to authenticate")
      ->check(CLI::Range(1, 600000))
      ->capture_default_str();
  tracker_cmd_->add_option("--heartbeat-timeout", tracker_.heartbeat_timeout_ms,
                           "Drop a server silent for this many milliseconds")
      ->check(CLI::Range(100, 86400000))
      ->capture_default_str();
  tracker_cmd_->add_flag("-v,--verbose", tracker_.verbose, "Log registrations and leases on stderr");

  rpc_cmd_ = app.add_subcommand("rpc", "Query the RPC device pool");
  rpc_cmd_->require_subcommand(1);
  status_cmd_ = rpc_cmd_->add_subcommand("status", "Print total/free/pending devices per key");
  status_cmd_->add_option("--tracker", status_tracker_, "Tracker address HOST:PORT")->required();
  status_cmd_->add_option("--auth-key-file", status_auth_key_file_,
                          "File holding the shared auth key (default: $KILN_RPC_AUTH_KEY)");
}

int RpcCommands::run() {
  if (*server_cmd_) {
    if (!server_.tracker.empty() && server_.key.empty()) throw Error("rpc-server: --tracker needs --key");
    std::string host;
    uint16_t port;
    if (!server_.tracker.empty() && !rpc::parse_host_port(server_.tracker, &host, &port))
      throw Error("rpc-server: bad --tracker '" + server_.tracker + "' (expected HOST:PORT)");
    return rpc::run_rpc_server(server_);
  }
  if (*tracker_cmd_) return rpc::run_tracker(tracker_);
  if (*status_cmd_) {
    std::string host;
    uint16_t port;
    if (!rpc::parse_host_port(status_tracker_, &host, &port))
      throw Error("rpc status: bad --tracker '" + status_tracker_ + "' (expected HOST:PORT)");
    rpc::ConnectOptions opts;
    std::string error;
    if (!rpc::load_auth_key(status_auth_key_file_, &opts.auth_key, &error)) throw Error("rpc status: " + error);
    opts.io_timeout_ms = 10000;
    auto client = rpc::TrackerClient::connect(host, port, opts);
    if (!client.ok()) throw Error("rpc status: tracker " + status_tracker_ + ": " + client.error().message);
    auto status = client->status();
    if (!status.ok()) throw Error("rpc status: tracker " + status_tracker_ + ": " + status.error().message);
    std::cout << rpc::format_status(status.value());
    return 0;
  }
  return -1;
}

}  // namespace kiln
