/// \file The device server: accepts RPC sessions, stores uploaded candidates in a private temp dir and
/// runs them in child processes; optionally registers with a tracker and heartbeats to it.
///
/// It is what runs on a board, so it depends on libc, libdl and pthreads only (no kiln libraries), and
/// it must survive anything a client or a candidate does: every size is bounded, every wait has a
/// timeout, and candidates run in children.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace kiln::rpc {

/// Everything `kiln rpc-server` / `kiln-rpc-server` can be told.
struct ServerOptions {
  std::string host = "127.0.0.1"; // address to listen on; anything but loopback needs an auth key
  uint16_t port = 9090;           // 0 picks a free port (port() tells which)
  std::string auth_key_file;      // file holding the shared auth key (run_rpc_server loads it, or $KILN_RPC_AUTH_KEY)
  std::string auth_key;           // the shared auth key itself (the secret; empty: none, loopback only)
  std::string tracker;            // "host:port" of a tracker to register with; empty: standalone
  std::string key;                // device key registered with the tracker (e.g. "rk3588"): a pool name, not a secret
  std::string advertise_host;     // host the tracker gives clients; empty: the address the tracker sees
  int session_timeout_ms = 60000; // idle time between frames before a session is closed
  int handshake_timeout_ms = 5000; // from accept to a verified HELLO
  int max_unauthenticated = 64;   // connections in their handshake at once; more wait in the backlog
  int frame_timeout_ms = 10000;   // time to receive the rest of a frame once it started
  uint32_t max_run_timeout_ms = 600000;  // clients' run timeouts are clamped to this
  int heartbeat_ms = 1000;        // interval of tracker heartbeats
  int max_sessions = 256;         // concurrent sessions; more are refused with kBusy
  std::string work_dir;           // parent of the upload dirs (kiln-rpc-<pid>-XXXXXX); empty: $TMPDIR or /tmp
  bool verbose = false;           // log every session event on stderr (rejections are always logged)
};

/// A running server. Sessions run in their own threads; stop() (or destruction) ends the accept loop
/// and the tracker heartbeat, and lets live sessions finish on their own.
class RpcServer {
 public:
  explicit RpcServer(ServerOptions opts);
  ~RpcServer();
  RpcServer(const RpcServer&) = delete;
  RpcServer& operator=(const RpcServer&) = delete;

  /// Opens the listening socket and removes upload dirs that killed servers left in the work dir;
  /// false with `error` filled when the address cannot be bound or is not loopback and no auth key
  /// is set (check_listen_policy).
  bool listen(std::string* error);
  /// The port actually bound (meaningful after listen(); differs from options when port was 0).
  uint16_t port() const;
  /// Accepts sessions until stop(); starts the tracker registration thread if a tracker was given.
  void serve();
  /// Ends serve() from another thread or a signal-safe flag watcher.
  void stop();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

/// The architecture this server was compiled for ("x86_64", "aarch64"), reported in WELCOME so a
/// client can tell it uploaded to the right kind of board.
const char* server_arch();

/// Removes `parent`/kiln-rpc-<pid>-* dirs (and the uploads in them) owned by this user whose pid is not
/// a live process, or is this process's own (a restarted server that got its old pid back). Returns
/// how many it removed. The server calls it at start-up so a server killed with SIGKILL leaves no
/// candidates behind for longer than its next start.
int remove_stale_upload_dirs(const std::string& parent);

/// Loads the auth key (auth_key_file or $KILN_RPC_AUTH_KEY unless auth_key is set), refuses a
/// non-loopback --host without one (one line on stderr, exit code 2), listens, prints "kiln-rpc-server
/// (ARCH) listening on HOST:PORT" on stdout (tests and scripts read the port from it when --port 0),
/// and serves until SIGINT/SIGTERM. Returns the exit code.
int run_rpc_server(ServerOptions o);

/// The whole `kiln-rpc-server` command line (also used by `kiln rpc-server`): parses argv, prints
/// "listening on HOST:PORT" on stdout, serves until SIGINT/SIGTERM. Returns the exit code.
int rpc_server_main(int argc, char** argv);

}  // namespace kiln::rpc
