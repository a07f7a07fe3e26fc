// TCP helpers: every blocking call is bounded by poll() so a silent peer costs a timeout, not a thread.
#include "runtime/rpc/net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

namespace kiln::rpc {

namespace {

int remaining_ms(int64_t deadline) {
  if (deadline < 0) return -1;
  int64_t left = deadline - monotonic_ms();
  return left < 0 ? 0 : static_cast<int>(left);
}

int64_t deadline_after(int timeout_ms) { return timeout_ms < 0 ? -1 : monotonic_ms() + timeout_ms; }

bool resolve(const std::string& host, uint16_t port, bool passive, sockaddr_storage* out, socklen_t* len,
             std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || !res) {
    if (error) *error = "cannot resolve '" + host + "': " + gai_strerror(rc);
    return false;
  }
  std::memcpy(out, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return true;
}

}  // namespace

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) reset(o.release());
  return *this;
}

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

int64_t monotonic_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

Fd listen_tcp(const std::string& host, uint16_t port, uint16_t* bound_port, std::string* error) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (!resolve(host, port, true, &addr, &len, error)) return Fd();
  Fd fd(::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) {
    if (error) *error = std::string("socket: ") + std::strerror(errno);
    return Fd();
  }
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    if (error) *error = "bind " + host + ":" + std::to_string(port) + ": " + std::strerror(errno);
    return Fd();
  }
  if (::listen(fd.get(), 256) != 0) {
    if (error) *error = std::string("listen: ") + std::strerror(errno);
    return Fd();
  }
  sockaddr_storage got{};
  socklen_t got_len = sizeof got;
  getsockname(fd.get(), reinterpret_cast<sockaddr*>(&got), &got_len);
  if (bound_port) {
    *bound_port = got.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&got)->sin6_port)
                                            : ntohs(reinterpret_cast<sockaddr_in*>(&got)->sin_port);
  }
  return fd;
}

Fd connect_tcp(const std::string& host, uint16_t port, int timeout_ms, std::string* error) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (!resolve(host, port, false, &addr, &len, error)) return Fd();
  Fd fd(::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) {
    if (error) *error = std::string("socket: ") + std::strerror(errno);
    return Fd();
  }
  std::string where = host + ":" + std::to_string(port);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    if (errno != EINPROGRESS) {
      if (error) *error = "connect " + where + ": " + std::strerror(errno);
      return Fd();
    }
    pollfd p{fd.get(), POLLOUT, 0};
    int rc;
    do rc = ::poll(&p, 1, timeout_ms); while (rc < 0 && errno == EINTR);
    if (rc == 0) {
      if (error) *error = "connect " + where + ": timed out";
      return Fd();
    }
    int err = 0;
    socklen_t el = sizeof err;
    getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &el);
    if (rc < 0 || err != 0) {
      if (error) *error = "connect " + where + ": " + std::strerror(err ? err : errno);
      return Fd();
    }
  }
  int flags = fcntl(fd.get(), F_GETFL);
  fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  int one = 1;
  setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

int wait_readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  int rc;
  do rc = ::poll(&p, 1, timeout_ms); while (rc < 0 && errno == EINTR);
  return rc < 0 ? -1 : (rc == 0 ? 0 : 1);
}

IoResult read_full(int fd, void* buf, size_t n, int timeout_ms) {
  auto* p = static_cast<uint8_t*>(buf);
  int64_t deadline = deadline_after(timeout_ms);
  while (n > 0) {
    int w = wait_readable(fd, remaining_ms(deadline));
    if (w == 0) return IoResult::kTimeout;
    if (w < 0) return IoResult::kError;
    ssize_t got = ::read(fd, p, n);  // read(), not recv(): the run child's result comes through a pipe
    if (got == 0) return IoResult::kClosed;
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return errno == ECONNRESET ? IoResult::kClosed : IoResult::kError;
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
  return IoResult::kOk;
}

IoResult read_some(int fd, void* buf, size_t n, int timeout_ms, size_t* got) {
  *got = 0;
  int64_t deadline = deadline_after(timeout_ms);
  for (;;) {
    int w = wait_readable(fd, remaining_ms(deadline));
    if (w == 0) return IoResult::kTimeout;
    if (w < 0) return IoResult::kError;
    ssize_t r = ::read(fd, buf, n);
    if (r == 0) return IoResult::kClosed;
    if (r < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return errno == ECONNRESET ? IoResult::kClosed : IoResult::kError;
    }
    *got = static_cast<size_t>(r);
    return IoResult::kOk;
  }
}

IoResult write_full(int fd, const void* buf, size_t n, int timeout_ms) {
  auto* p = static_cast<const uint8_t*>(buf);
  int64_t deadline = deadline_after(timeout_ms);
  while (n > 0) {
    pollfd pf{fd, POLLOUT, 0};
    int rc;
    do rc = ::poll(&pf, 1, remaining_ms(deadline)); while (rc < 0 && errno == EINTR);
    if (rc == 0) return IoResult::kTimeout;
    if (rc < 0) return IoResult::kError;
    ssize_t put = ::send(fd, p, n, MSG_NOSIGNAL);
    if (put < 0 && errno == ENOTSOCK) put = ::write(fd, p, n);  // a pipe (SIGPIPE is ignored there)
    if (put < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return (errno == EPIPE || errno == ECONNRESET) ? IoResult::kClosed : IoResult::kError;
    }
    p += put;
    n -= static_cast<size_t>(put);
  }
  return IoResult::kOk;
}

void drain_before_close(int fd, int max_ms) {
  ::shutdown(fd, SHUT_WR);
  int64_t deadline = monotonic_ms() + max_ms;
  char buf[4096];
  for (size_t total = 0; total < (1u << 20);) {
    if (wait_readable(fd, remaining_ms(deadline)) <= 0) return;
    ssize_t got = ::read(fd, buf, sizeof buf);
    if (got <= 0) return;
    total += static_cast<size_t>(got);
  }
}

std::string peer_host(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
  char buf[INET6_ADDRSTRLEN] = {0};
  if (addr.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, buf, sizeof buf);
  else if (addr.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr, buf, sizeof buf);
  return buf;
}

bool parse_host_port(const std::string& s, std::string* host, uint16_t* port) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon + 1 == s.size()) return false;
  unsigned long v = 0;
  for (size_t i = colon + 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + static_cast<unsigned long>(s[i] - '0');
    if (v > 65535) return false;
  }
  *host = s.substr(0, colon);
  if (host->empty()) *host = "127.0.0.1";
  *port = static_cast<uint16_t>(v);
  return true;
}

}  // namespace kiln::rpc
