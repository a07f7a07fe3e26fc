// libFuzzer target for the stateful side of the RPC protocol: what a device server and the tracker do
// with a peer's bytes. The first byte picks the handler; the rest arrives on a socketpair as the peer's
// bytes, and the handler's answers are drained on another thread.
//   0, 1: the accepting handshake (preamble, CHALLENGE, HELLO) without and with an auth key, as every
//         listener runs it first. Its proof covers a fresh random nonce, so no input gets past it;
//   2, 3: the tracker after a handshake, the peer as a tuner (REQUEST, RELEASE, STATUS) or as a device
//         server (REGISTER, heartbeats), on one tracker whose pool lives across inputs.
// A device server's session after the handshake is not fuzzed: it runs what it is sent, which is
// what the key protects (docs/rpc.md); its decoders are in fuzz_rpc_frames.cc. Any input must end in
// a clean close, never in a crash, a hang (the peer's side is shut after the bytes), a leak or an
// unbounded allocation.
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/rpc/handshake.h"
#include "runtime/rpc/net.h"
#include "runtime/rpc/tracker.h"

using namespace kiln::rpc;

namespace {

Tracker& tracker() {
  static Tracker* t = [] {
    std::signal(SIGPIPE, SIG_IGN);
    TrackerOptions o;
    o.heartbeat_timeout_ms = 50;  // a peer that stops talking is let go at once
    return new Tracker(o);
  }();
  return *t;
}

// Reads whatever the handler answers until it closes its end, on one thread for the whole run: a
// thread per input made the run's memory grow by ~180 bytes an input (measured on the handshake alone,
// which keeps no state; with this thread it stays flat).
class Drain {
 public:
  Drain() : thread_([this] { loop(); }) { thread_.detach(); }
  // Drains `fd` until its peer closes; wait() returns after that.
  void start(int fd) {
    std::lock_guard<std::mutex> lock(mu_);
    fd_ = fd;
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return fd_ < 0; });
  }

 private:
  void loop() {
    for (;;) {
      int fd;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return fd_ >= 0; });
        fd = fd_;
      }
      char buf[4096];
      while (read(fd, buf, sizeof buf) > 0) {
      }
      std::lock_guard<std::mutex> lock(mu_);
      fd_ = -1;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  int fd_ = -1;
  std::thread thread_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > (1u << 16)) return 0;  // fits a socketpair's buffer: one write never blocks
  Tracker& t = tracker();
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 0;
  if (size > 1 && write(fds[1], data + 1, size - 1) != static_cast<ssize_t>(size - 1)) {
    close(fds[0]);
    close(fds[1]);
    return 0;
  }
  shutdown(fds[1], SHUT_WR);  // the peer is done: every read past its bytes sees the close
  static Drain* drain = new Drain;
  drain->start(fds[1]);
  const int mode = data[0] % 4;
  if (mode < 2) {
    AcceptConfig cfg;
    cfg.auth_key = mode == 0 ? "" : "fuzz-key";
    cfg.allowed_roles = (1u << static_cast<unsigned>(Role::kClient)) | (1u << static_cast<unsigned>(Role::kDeviceServer)) |
                        (1u << static_cast<unsigned>(Role::kTrackerClient));
    cfg.deadline_ms = monotonic_ms() + 200;
    AcceptedPeer peer;
    std::string why;
    accept_handshake(fds[0], cfg, &peer, &why);
  } else {
    t.serve_authenticated(fds[0], mode == 3);
  }
  shutdown(fds[0], SHUT_RDWR);  // ends the drain
  drain->wait();
  close(fds[0]);
  close(fds[1]);
  return 0;
}
