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
  std::string host = "0.0.0.0";
  uint16_t port = 9190;               // 0 picks a free port
  std::string token;                  // when set, servers and tuners must present it in HELLO
  int heartbeat_timeout_ms = 5000;    // a server silent this long is dropped
  bool verbose = false;               // log registrations, drops, leases on stderr
};

/// A running tracker. One thread per connection; a lease lasts until released or until the tuner's
/// connection closes; a server leaves the pool when its connection closes or its heartbeats stop.
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

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

/// Listens, prints "kiln tracker listening on HOST:PORT" on stdout, serves until SIGINT/SIGTERM.
int run_tracker(const TrackerOptions& o);

}  // namespace kiln::rpc
