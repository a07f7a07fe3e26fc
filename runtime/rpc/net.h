/// \file Thin TCP helpers for the RPC server, tracker and client: listen, connect and full reads and
/// writes with deadlines. Every wait goes through poll() with a timeout so no peer can hang a thread.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::rpc {

/// An owned file descriptor, closed on destruction, so early returns cannot leak sockets.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { int f = fd_; fd_ = -1; return f; }
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

/// Binds and listens on host:port (port 0 picks a free one); `*bound_port` receives the real port.
/// Returns an invalid Fd and fills `error` on failure.
Fd listen_tcp(const std::string& host, uint16_t port, uint16_t* bound_port, std::string* error);

/// Connects to host:port within timeout_ms. Returns an invalid Fd and fills `error` on failure.
Fd connect_tcp(const std::string& host, uint16_t port, int timeout_ms, std::string* error);

/// Waits until fd is readable; returns 1 ready, 0 timeout, -1 error. timeout_ms < 0 waits forever.
int wait_readable(int fd, int timeout_ms);

/// Outcome of a full read or write.
enum class IoResult { kOk, kTimeout, kClosed, kError };

/// Reads exactly n bytes or fails; the deadline covers all of them.
IoResult read_full(int fd, void* buf, size_t n, int timeout_ms);
/// Reads between 1 and n bytes (as many as are there once the fd is readable) into buf; *got says how
/// many. kTimeout when nothing arrived within timeout_ms.
IoResult read_some(int fd, void* buf, size_t n, int timeout_ms, size_t* got);
/// Writes exactly n bytes (never raising SIGPIPE) or fails; the deadline covers all of them.
IoResult write_full(int fd, const void* buf, size_t n, int timeout_ms);

/// Ends a connection after a final message: shuts down our side, then discards what the peer still
/// sends (at most max_ms / 1 MiB) before the caller closes. Closing with unread input makes the kernel
/// send a reset, which can destroy the final message (e.g. an ERROR frame) before the peer reads it.
void drain_before_close(int fd, int max_ms = 500);

/// The numeric address of the peer of a connected socket ("127.0.0.1"), or "" when unknown.
std::string peer_host(int fd);

/// Milliseconds on CLOCK_MONOTONIC, for deadlines.
int64_t monotonic_ms();

/// Parses "host:port"; false when the port is missing or out of range.
bool parse_host_port(const std::string& s, std::string* host, uint16_t* port);

}  // namespace kiln::rpc
