// The tracker: one thread per connection, one mutex over the pool. Matching (pending request -> free
// server) runs whenever the pool changes and writes ASSIGNED frames to the waiting tuners.
#include "runtime/rpc/tracker.h"

#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "runtime/rpc/net.h"
#include "runtime/rpc/protocol.h"

namespace kiln::rpc {

namespace {

constexpr int kHandshakeTimeoutMs = 10000;
constexpr int kFrameTimeoutMs = 10000;
constexpr int kWriteTimeoutMs = 5000;
constexpr size_t kMaxTrackerFrame = 4096;

// A tuner's connection; shared with the pending requests that must be answered on it.
struct TunerConn {
  int fd = -1;
  std::mutex write_mu;
};

struct ServerEntry {
  std::string key, host;
  uint16_t port = 0;
  uint64_t lease = 0;        // 0: free
  int64_t last_assigned = 0; // least recently used free server is handed out first
};

struct Pending {
  uint64_t seq;
  uint32_t request_id;
  std::string key;
  int32_t priority;
  std::shared_ptr<TunerConn> conn;
};

}  // namespace

struct Tracker::Impl {
  TrackerOptions opts;
  Fd listener;
  uint16_t bound_port = 0;
  std::atomic<bool> stopping{false};

  std::mutex mu;
  uint64_t next_server = 1, next_lease = 1, next_seq = 1;
  std::map<uint64_t, ServerEntry> servers;
  std::vector<Pending> pending;
  std::map<uint64_t, std::shared_ptr<TunerConn>> lease_owner;

  void log(const std::string& line, bool always = false) {
    if (!always && !opts.verbose) return;
    fprintf(stderr, "kiln tracker: %s\n", line.c_str());
  }

  // Hands free servers to waiting requests: highest priority first, then oldest. Caller holds mu.
  void match_locked() {
    std::sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) {
      return a.priority != b.priority ? a.priority > b.priority : a.seq < b.seq;
    });
    for (auto it = pending.begin(); it != pending.end();) {
      ServerEntry* best = nullptr;
      for (auto& [id, e] : servers)
        if (e.key == it->key && e.lease == 0 && (!best || e.last_assigned < best->last_assigned)) best = &e;
      if (!best) {
        ++it;
        continue;
      }
      best->lease = next_lease++;
      best->last_assigned = monotonic_ms();
      lease_owner[best->lease] = it->conn;
      Writer w;
      w.u32(it->request_id);
      w.u64(best->lease);
      w.str(best->host);
      w.u16(best->port);
      {
        std::lock_guard<std::mutex> lock(it->conn->write_mu);
        write_frame(it->conn->fd, MsgType::kAssigned, w.bytes(), kWriteTimeoutMs);
      }
      log("lease " + std::to_string(best->lease) + ": " + best->key + " " + best->host + ":" +
          std::to_string(best->port));
      it = pending.erase(it);
    }
  }

  void release_locked(uint64_t lease) {
    lease_owner.erase(lease);
    for (auto& [id, e] : servers)
      if (e.lease == lease) e.lease = 0;
  }

  std::vector<KeyStatus> status() {
    std::lock_guard<std::mutex> lock(mu);
    std::map<std::string, KeyStatus> by_key;
    for (const auto& [id, e] : servers) {
      KeyStatus& k = by_key[e.key];
      ++k.total;
      if (e.lease == 0) ++k.free;
    }
    for (const auto& p : pending) ++by_key[p.key].pending;
    std::vector<KeyStatus> out;
    for (auto& [key, k] : by_key) {
      k.key = key;
      out.push_back(k);
      if (out.size() == kMaxStatusEntries) break;
    }
    return out;
  }

  void serve_device_server(int fd, const std::string& peer);
  void serve_tuner(int fd);
  void handle(Fd conn);
};

void Tracker::Impl::serve_device_server(int fd, const std::string& peer) {
  Frame f;
  if (!read_frame(fd, &f, kHandshakeTimeoutMs, kFrameTimeoutMs, kMaxTrackerFrame).ok() || f.type != MsgType::kRegister)
    return send_error(fd, ErrorCode::kProtocol, "expected REGISTER");
  Reader r(f.body);
  ServerEntry e;
  e.key = r.str();
  e.host = r.str();
  e.port = r.u16();
  if (!r.done() || e.key.empty()) return send_error(fd, ErrorCode::kProtocol, "malformed REGISTER");
  if (e.host.empty()) e.host = peer;
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu);
    id = next_server++;
    servers[id] = e;
  }
  log("server " + e.host + ":" + std::to_string(e.port) + " registered under '" + e.key + "'");
  if (write_frame(fd, MsgType::kRegistered, {}, kWriteTimeoutMs).ok()) {
    {
      std::lock_guard<std::mutex> lock(mu);
      match_locked();
    }
    for (;;) {
      IoStatus io = read_frame(fd, &f, opts.heartbeat_timeout_ms, kFrameTimeoutMs, kMaxTrackerFrame);
      if (io.kind == IoStatus::kTimeout) {
        log("server " + e.host + ":" + std::to_string(e.port) + " missed its heartbeats; dropped", true);
        break;
      }
      if (!io.ok() || f.type != MsgType::kHeartbeat || stopping) break;
    }
  }
  std::lock_guard<std::mutex> lock(mu);
  auto it = servers.find(id);
  if (it != servers.end() && it->second.lease) lease_owner.erase(it->second.lease);
  servers.erase(id);
  log("server " + e.host + ":" + std::to_string(e.port) + " left the pool");
}

void Tracker::Impl::serve_tuner(int fd) {
  auto conn = std::make_shared<TunerConn>();
  conn->fd = fd;
  Frame f;
  while (!stopping) {
    // Tuners may hold a lease for hours between messages: no session timeout here, but wake up now
    // and then to notice stop().
    IoStatus io = read_frame(fd, &f, 500, kFrameTimeoutMs, kMaxTrackerFrame);
    if (io.kind == IoStatus::kTimeout) continue;
    if (!io.ok()) {
      if (io.kind != IoStatus::kClosed) {
        std::lock_guard<std::mutex> lock(conn->write_mu);
        send_error(fd, io.kind == IoStatus::kTooLarge ? ErrorCode::kTooLarge : ErrorCode::kProtocol, io.message);
      }
      break;
    }
    Reader r(f.body);
    if (f.type == MsgType::kRequest) {
      Pending p;
      p.request_id = r.u32();
      p.key = r.str();
      p.priority = r.i32();
      if (!r.done()) break;
      p.conn = conn;
      std::lock_guard<std::mutex> lock(mu);
      p.seq = next_seq++;
      pending.push_back(std::move(p));
      match_locked();
    } else if (f.type == MsgType::kRelease) {
      uint64_t lease = r.u64();
      if (!r.done()) break;
      std::lock_guard<std::mutex> lock(mu);
      auto it = lease_owner.find(lease);
      if (it != lease_owner.end() && it->second == conn) release_locked(lease);
      match_locked();
    } else if (f.type == MsgType::kStatus) {
      if (!r.done()) break;
      Writer w;
      encode_status(w, status());
      std::lock_guard<std::mutex> lock(conn->write_mu);
      if (!write_frame(fd, MsgType::kStatusReply, w.bytes(), kWriteTimeoutMs).ok()) break;
    } else {
      std::lock_guard<std::mutex> lock(conn->write_mu);
      send_error(fd, ErrorCode::kProtocol, "unexpected message type " + std::to_string(static_cast<int>(f.type)));
      break;
    }
  }
  // The tuner is gone: its waiting requests are withdrawn and its leases return to the pool.
  std::lock_guard<std::mutex> lock(mu);
  pending.erase(std::remove_if(pending.begin(), pending.end(), [&](const Pending& p) { return p.conn == conn; }),
                pending.end());
  std::vector<uint64_t> held;
  for (const auto& [lease, owner] : lease_owner)
    if (owner == conn) held.push_back(lease);
  for (uint64_t l : held) release_locked(l);
  match_locked();
}

void Tracker::Impl::handle(Fd conn) {
  int fd = conn.get();
  std::string peer = peer_host(fd);
  uint8_t magic[4];
  uint16_t version = 0, role = 0;
  if (!read_preamble(fd, magic, &version, &role, kHandshakeTimeoutMs).ok()) return;
  HandshakeStatus hs = HandshakeStatus::kOk;
  if (memcmp(magic, kMagic, 4) != 0) hs = HandshakeStatus::kBadMagic;
  else if (version != kProtocolVersion) hs = HandshakeStatus::kBadVersion;
  else if (role != static_cast<uint16_t>(Role::kDeviceServer) && role != static_cast<uint16_t>(Role::kTrackerClient))
    hs = HandshakeStatus::kBadRole;
  if (!write_preamble(fd, static_cast<uint16_t>(hs), 2000).ok() || hs != HandshakeStatus::kOk) {
    if (hs != HandshakeStatus::kOk) {
      log("connection from " + peer + " rejected in the handshake", true);
      drain_before_close(fd);
    }
    return;
  }
  Frame f;
  if (!read_frame(fd, &f, kHandshakeTimeoutMs, kFrameTimeoutMs, kMaxTrackerFrame).ok() || f.type != MsgType::kHello)
    return send_error(fd, ErrorCode::kProtocol, "expected HELLO");
  Reader hello(f.body);
  std::string token = hello.str();
  (void)hello.str();
  if (!hello.done()) return send_error(fd, ErrorCode::kProtocol, "malformed HELLO");
  if (!opts.token.empty() && token != opts.token) {
    log("connection from " + peer + " rejected: wrong token", true);
    return send_error(fd, ErrorCode::kAuth, "wrong token");
  }
  Writer w;
  w.str("tracker");
  w.str("");
  w.u32(0);
  w.u32(0);
  w.u32(0);
  if (!write_frame(fd, MsgType::kWelcome, w.bytes(), kWriteTimeoutMs).ok()) return;
  if (role == static_cast<uint16_t>(Role::kDeviceServer))
    serve_device_server(fd, peer);
  else
    serve_tuner(fd);
}

Tracker::Tracker(TrackerOptions opts) : impl_(std::make_shared<Impl>()) { impl_->opts = std::move(opts); }
Tracker::~Tracker() { stop(); }

bool Tracker::listen(std::string* error) {
  impl_->listener = listen_tcp(impl_->opts.host, impl_->opts.port, &impl_->bound_port, error);
  return impl_->listener.valid();
}

uint16_t Tracker::port() const { return impl_->bound_port; }
void Tracker::stop() { impl_->stopping = true; }

void Tracker::serve() {
  signal(SIGPIPE, SIG_IGN);
  while (!impl_->stopping) {
    if (wait_readable(impl_->listener.get(), 100) <= 0) continue;
    Fd conn(accept4(impl_->listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn.valid()) continue;
    std::thread([impl = impl_, c = std::move(conn)]() mutable { impl->handle(std::move(c)); }).detach();
  }
}

namespace {
std::atomic<bool> g_tracker_signalled{false};
void on_tracker_signal(int) { g_tracker_signalled = true; }
}  // namespace

int run_tracker(const TrackerOptions& o) {
  Tracker tracker(o);
  std::string error;
  if (!tracker.listen(&error)) {
    fprintf(stderr, "kiln tracker: %s\n", error.c_str());
    return 1;
  }
  printf("kiln tracker listening on %s:%u\n", o.host.c_str(), tracker.port());
  fflush(stdout);
  struct sigaction sa {};
  sa.sa_handler = on_tracker_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::thread watcher([&] {
    while (!g_tracker_signalled) usleep(100000);
    tracker.stop();
  });
  tracker.serve();
  watcher.join();
  return 0;
}

}  // namespace kiln::rpc
