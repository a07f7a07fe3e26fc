/// \file The client side of kiln RPC: sessions with a device server (upload, run) and a tracker
/// connection (request/release a device, pool status).
///
/// This is the API the RPCRunner measures with. It never throws: connection and protocol failures
/// come back as values, because a board that reboots mid-batch is routine during tuning and must turn
/// into per-candidate errors, not a dead tuner.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/rpc/net.h"
#include "runtime/rpc/protocol.h"

namespace kiln::rpc {

/// Why a client call failed (other than a run that failed on the device, see RunError).
struct ClientError {
  enum Kind {
    kConnect,   // TCP connect failed or timed out
    kHandshake, // the peer is not a kiln peer, or speaks another version, or refused the role
    kRejected,  // the peer sent an ERROR frame (server_code says why) and closed the session
    kTimeout,   // no answer within the client's I/O timeout
    kClosed,    // the connection broke
    kProtocol,  // the peer sent something this client cannot decode
  } kind = kProtocol;
  ErrorCode server_code = ErrorCode::kProtocol;  // meaningful for kRejected
  std::string message;
};

/// A value or a ClientError (C++20 has no std::expected).
template <class T>
class Expected {
 public:
  Expected(T value) : value_(std::move(value)) {}
  Expected(ClientError error) : error_(std::move(error)) {}
  bool ok() const { return value_.has_value(); }
  T& value() { return *value_; }
  const T& value() const { return *value_; }
  T* operator->() { return &*value_; }
  const ClientError& error() const { return error_; }

 private:
  std::optional<T> value_;
  ClientError error_;
};

/// How a measurement ended, as the runner sees it: the device's own three outcomes plus the ways a
/// session can break under it.
enum class RunError : uint8_t {
  kNone = 0,
  kRuntimeDevice = 1,   // crash, signal, dlopen/dlsym failure on the device
  kRunTimeout = 2,      // the candidate ran past run_timeout_ms and was killed
  kSessionTimeout = 3,  // the server closed the session for idling (not the candidate's fault)
  kConnection = 4,      // the connection broke or timed out (e.g. the board died)
  kRejected = 5,        // the server refused the request (bounds, unknown module, ...)
};
const char* run_error_name(RunError e);

/// One run: everything in RunSpec (module id from upload(), function, buffers, seed, timing knobs).
using RunRequest = RunSpec;

/// One run's result: per-repeat seconds per call, and the output bytes by buffer index (empty vectors
/// for buffers that are not outputs). Outputs are not checked here: comparing them with a reference is
/// the runner's job.
struct RunResult {
  RunError error = RunError::kNone;
  std::string message;
  std::vector<double> costs;
  std::vector<std::vector<uint8_t>> outputs;
};

/// Connection settings shared by sessions and tracker clients.
struct ConnectOptions {
  /// The shared auth key (the secret, not the device key; see auth_key.h's load_auth_key). Empty: none,
  /// which only a listener without a key accepts. The peer must prove it knows the same key.
  std::string auth_key;
  std::string client_name = "kiln";
  int connect_timeout_ms = 5000;
  int io_timeout_ms = 60000;  // per request; a run also gets its run_timeout_ms on top
};

/// Connects and runs the connecting side of the handshake (handshake.h) in `role`: preamble, CHALLENGE,
/// HELLO with this side's proof, WELCOME whose proof must verify (else kHandshake with server_code
/// kAuth: the peer does not know the key). *info receives WELCOME's fields. Sessions, tracker clients
/// and registering device servers all connect through it.
Expected<Fd> connect_authenticated(const std::string& host, uint16_t port, Role role, const ConnectOptions& opts,
                                   ServerInfo* info);

/// A session with one device server. Uploaded modules live until the session closes. After any error
/// the session is closed and every later call fails fast.
class Session {
 public:
  static Expected<Session> connect(const std::string& host, uint16_t port, const ConnectOptions& opts = {});
  Session(Session&&) = default;
  Session& operator=(Session&&) = default;
  ~Session() { close(); }

  const ServerInfo& info() const { return info_; }
  /// Sends a shared object; `name` is a label (a plain file name), the server picks the path.
  Expected<uint32_t> upload(const std::string& name, const std::vector<uint8_t>& bytes);
  /// Reads a file and uploads it under its base name.
  Expected<uint32_t> upload_file(const std::string& path);
  /// Runs req.func of module req.module on the device.
  RunResult run(const RunRequest& req);
  /// Says BYE and closes; idempotent.
  void close();
  bool is_open() const { return fd_.valid(); }

 private:
  Session(Fd fd, ConnectOptions opts) : fd_(std::move(fd)), opts_(std::move(opts)) {}
  ClientError fail(ClientError e);
  // True (with *e set, session closed) when the server already sent an ERROR or closed the connection.
  bool pending_error(ClientError* e);
  Fd fd_;
  ConnectOptions opts_;
  ServerInfo info_;
};

/// A device the tracker lent out: connect a Session to host:port, release it when done.
struct Lease {
  uint64_t id = 0;
  std::string host;
  uint16_t port = 0;
};

/// A tuner's connection to a tracker. Leases are tied to it: closing it returns them to the pool.
class TrackerClient {
 public:
  static Expected<TrackerClient> connect(const std::string& host, uint16_t port, const ConnectOptions& opts = {});
  TrackerClient(TrackerClient&&) = default;
  TrackerClient& operator=(TrackerClient&&) = default;

  /// Waits up to timeout_ms for a free server of `key`; higher priority is served first. A request
  /// that times out stays queued at the tracker; if it is granted later, the lease is given back
  /// automatically on this client's next call.
  Expected<Lease> request(const std::string& key, int32_t priority, int timeout_ms);
  /// Returns a lease to the pool (a lease on a server that died is simply forgotten).
  bool release(const Lease& lease);
  /// Per-key total/free/pending counts.
  Expected<std::vector<KeyStatus>> status();

 private:
  TrackerClient(Fd fd, ConnectOptions opts) : fd_(std::move(fd)), opts_(std::move(opts)) {}
  // Reads frames until one of `want` arrives, giving back leases granted to abandoned requests.
  Expected<Frame> await(MsgType want, uint32_t request_id, int timeout_ms);
  Fd fd_;
  ConnectOptions opts_;
  uint32_t next_request_ = 1;
};

/// `kiln rpc status` output: one line per key with total, free and pending counts.
std::string format_status(const std::vector<KeyStatus>& keys);

}  // namespace kiln::rpc
