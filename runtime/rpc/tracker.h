/// \file The tracker: a pool of device servers per key. Servers register and heartbeat; tuners request
/// a device of a key with a priority, get a server address when one is free, and release it.
///
/// It exists so a tuner can share boards with other tuners without knowing their addresses, and so a
/// board that dies or hangs drops out of the pool instead of stalling every tuner that asks for one.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace kiln::rpc {

/// Everything `kiln tracker` can be told.
struct TrackerOptions {
  std::string host = "127.0.0.1";     // anything but loopback needs an auth key
  uint16_t port = 9190;               // 0 picks a free port
  std::string auth_key_file;          // file holding the shared auth key (run_tracker loads it, or $KILN_RPC_AUTH_KEY)
  std::string auth_key;               // the shared secret servers and tuners must prove; empty: none (loopback only)
  int heartbeat_timeout_ms = 5000;    // a server silent this long is dropped
  int lease_timeout_ms = 600000;      // a lease not released by then returns its server to the pool
  int max_pending = 1024;             // queued requests over all tuners; more are answered ERROR busy
  int max_connections = 1024;         // authenticated connections (servers and tuners); more: ERROR busy
  int handshake_timeout_ms = 5000;    // from accept to a verified HELLO
  int max_unauthenticated = 64;       // connections in their handshake at once; more wait in the backlog
  bool verbose = false;               // log registrations, drops, leases on stderr
};

/// Requests one tuner connection may have queued at once (a single tuner cannot fill the queue).
inline constexpr int kMaxPendingPerTuner = 64;

/// A running tracker. One thread per connection; a lease lasts until released, until the tuner's
/// connection closes, or until the lease timeout; a server leaves the pool when its connection
/// closes or its heartbeats stop. A REGISTER's host must be the connection's peer address unless the
/// server proved a configured auth key (then it may advertise another address, e.g. behind NAT).
class Tracker {
 public:
  explicit Tracker(TrackerOptions opts);
  ~Tracker();
  Tracker(const Tracker&) = delete;
  Tracker& operator=(const Tracker&) = delete;

  /// Opens the listening socket; false with `error` filled when the address cannot be bound.
  bool listen(std::string* error);
  /// The port actually bound.
  uint16_t port() const;
  /// Accepts connections until stop().
  void serve();
  void stop();
  /// Serves, on the calling thread, a connection whose handshake already succeeded with `device_server`
  /// as its role (else a tuner's): what serve() runs for each connection after HELLO verified (a device
  /// server's REGISTER and heartbeats, or a tuner's requests, releases and status queries) until it
  /// closes. The tracker keeps its pool across calls. For the session fuzzer and tests.
  void serve_authenticated(int fd, bool device_server);

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

/// Loads the auth key (auth_key_file or $KILN_RPC_AUTH_KEY unless auth_key is set), refuses a
/// non-loopback host without one (exit code 2), listens, prints "kiln tracker listening on HOST:PORT"
/// on stdout, serves until SIGINT/SIGTERM.
int run_tracker(TrackerOptions o);

}  // namespace kiln::rpc
