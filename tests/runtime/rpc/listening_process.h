/// \file A server or tracker started as a child process on a free port, for tests that talk to real
/// `kiln rpc-server` / `kiln tracker` / `kiln-rpc-server` processes (the RPC tests and the runner tests).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/rpc/tracker.h"

namespace kiln::rpc::test {

/// A server or tracker process on a free port: started with argv (plus "--port 0"), its port read from
/// the "listening on HOST:PORT" line it prints. Killed (SIGKILL) at destruction or by kill().
class Process {
 public:
  explicit Process(std::vector<std::string> argv, int startup_timeout_ms = 30000);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  bool started() const { return port_ != 0; }
  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  void kill();

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

/// A Tracker in this process on a free 127.0.0.1 port (whatever host and port `o` names), serving on
/// its own thread; stopped and joined at destruction. For tests that set options the command line
/// does not offer (max_connections, short lease timeouts).
class TrackerThread {
 public:
  explicit TrackerThread(TrackerOptions o = {});
  ~TrackerThread();
  TrackerThread(const TrackerThread&) = delete;
  TrackerThread& operator=(const TrackerThread&) = delete;
  uint16_t port() const { return tracker_->port(); }

 private:
  std::unique_ptr<Tracker> tracker_;
  std::thread thread_;
};

/// Waits (up to 30 s) until the tracker on 127.0.0.1:`tracker` lists at least `n` servers of `key`
/// (the device key); `auth_key` is the tracker's shared secret, if it has one.
bool wait_for_servers(uint16_t tracker, const std::string& key, uint32_t n, const std::string& auth_key = "");

}  // namespace kiln::rpc::test
