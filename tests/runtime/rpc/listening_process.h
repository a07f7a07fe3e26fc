/// \file A server or tracker started as a child process on a free port, for tests that talk to real
/// `kiln rpc-server` / `kiln tracker` / `kiln-rpc-server` processes (the RPC tests and the runner tests).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

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

/// Waits (up to 30 s) until the tracker on 127.0.0.1:`tracker` lists at least `n` servers of `key`.
bool wait_for_servers(uint16_t tracker, const std::string& key, uint32_t n);

}  // namespace kiln::rpc::test
