// The tracker: connections from the shared accept loop, one mutex over the pool. Matching (pending
// request -> free server) runs whenever the pool changes and writes ASSIGNED frames to the waiting
// tuners; a reaper thread ends leases that outlived the lease timeout.
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

#include "runtime/rpc/accept_loop.h"
#include "runtime/rpc/auth_key.h"
#include "runtime/rpc/handshake.h"
#include "runtime/rpc/net.h"
#include "runtime/rpc/protocol.h"

namespace kiln::rpc {

namespace {

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
  int64_t lease_expires = 0; // monotonic ms at which the lease ends on its own
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
  std::shared_ptr<ConnectionCounts> counts = std::make_shared<ConnectionCounts>();

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
      best->lease_expires = best->last_assigned + opts.lease_timeout_ms;
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

  // Ends every lease past its deadline and hands the servers on; runs until stop().
  void reap_leases() {
    const int period = std::clamp(opts.lease_timeout_ms / 10, 10, 1000);
    while (!stopping) {
      usleep(static_cast<useconds_t>(std::min(period, 100)) * 1000);
      std::lock_guard<std::mutex> lock(mu);
      int64_t now = monotonic_ms();
      std::vector<uint64_t> expired;
      for (const auto& [id, e] : servers)
        if (e.lease != 0 && now >= e.lease_expires) expired.push_back(e.lease);
      for (uint64_t l : expired) {
        log("lease " + std::to_string(l) + " expired after " + std::to_string(opts.lease_timeout_ms) + " ms", true);
        release_locked(l);
      }
      if (!expired.empty()) match_locked();
    }
  }

  // Sends ERROR and ends the connection politely (drain, so the ERROR is not lost to a reset).
  void fail(int fd, std::mutex* write_mu, ErrorCode code, const std::string& why, const std::string& peer) {
    log("connection from " + peer + " ended (" + error_code_name(code) + "): " + why, true);
    {
      std::unique_lock<std::mutex> lock;
      if (write_mu) lock = std::unique_lock<std::mutex>(*write_mu);
      send_error(fd, code, why);
    }
    drain_before_close(fd);
  }

  void serve_device_server(int fd, const std::string& peer, bool keyed);
  void serve_tuner(int fd, const std::string& peer);
  void handle(Fd conn, Admission admission);
};

void Tracker::Impl::serve_device_server(int fd, const std::string& peer, bool keyed) {
  Frame f;
  IoStatus io = read_frame(fd, &f, kFrameTimeoutMs, kFrameTimeoutMs, kMaxTrackerFrame);
  if (io.kind == IoStatus::kClosed) return;
  if (io.kind == IoStatus::kTooLarge) return fail(fd, nullptr, ErrorCode::kTooLarge, io.message, peer);
  if (!io.ok() || f.type != MsgType::kRegister) return fail(fd, nullptr, ErrorCode::kProtocol, "expected REGISTER", peer);
  Reader r(f.body);
  ServerEntry e;
  e.key = r.str();
  e.host = r.str();
  e.port = r.u16();
  if (!r.done() || e.key.empty() || e.port == 0) return fail(fd, nullptr, ErrorCode::kProtocol, "malformed REGISTER", peer);
  // Tuners will upload code to whatever address is registered here, so a server may only name itself
  // (its peer address) unless it proved a configured auth key: then the operator vouched for it and an
  // advertised address (NAT, a second interface) is taken as given.
  if (e.host.empty()) e.host = peer;
  else if (e.host != peer && !keyed)
    return fail(fd, nullptr, ErrorCode::kAuth,
                "REGISTER for host '" + e.host + "' from " + peer + ": advertising another host needs an auth key", peer);
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

void Tracker::Impl::serve_tuner(int fd, const std::string& peer) {
  auto conn = std::make_shared<TunerConn>();
  conn->fd = fd;
  Frame f;
  while (!stopping) {
    // Tuners may hold a lease for hours between messages: no session timeout here, but wake up now
    // and then to notice stop().
    IoStatus io = read_frame(fd, &f, 500, kFrameTimeoutMs, kMaxTrackerFrame);
    if (io.kind == IoStatus::kTimeout) continue;
    if (!io.ok()) {
      if (io.kind != IoStatus::kClosed)
        fail(fd, &conn->write_mu, io.kind == IoStatus::kTooLarge ? ErrorCode::kTooLarge : ErrorCode::kProtocol,
             io.message, peer);
      break;
    }
    Reader r(f.body);
    if (f.type == MsgType::kRequest) {
      Pending p;
      p.request_id = r.u32();
      p.key = r.str();
      p.priority = r.i32();
      if (!r.done()) {
        fail(fd, &conn->write_mu, ErrorCode::kProtocol, "malformed REQUEST", peer);
        break;
      }
      p.conn = conn;
      std::unique_lock<std::mutex> lock(mu);
      int mine = 0;
      for (const Pending& q : pending) mine += q.conn == conn;
      if (static_cast<int>(pending.size()) >= opts.max_pending || mine >= kMaxPendingPerTuner) {
        lock.unlock();
        fail(fd, &conn->write_mu, ErrorCode::kBusy,
             mine >= kMaxPendingPerTuner ? "more than " + std::to_string(kMaxPendingPerTuner) + " requests queued on one connection"
                                         : "request queue full (" + std::to_string(opts.max_pending) + ")",
             peer);
        break;
      }
      p.seq = next_seq++;
      pending.push_back(std::move(p));
      match_locked();
    } else if (f.type == MsgType::kRelease) {
      uint64_t lease = r.u64();
      if (!r.done()) {
        fail(fd, &conn->write_mu, ErrorCode::kProtocol, "malformed RELEASE", peer);
        break;
      }
      std::lock_guard<std::mutex> lock(mu);
      auto it = lease_owner.find(lease);
      if (it != lease_owner.end() && it->second == conn) release_locked(lease);
      match_locked();
    } else if (f.type == MsgType::kStatus) {
      if (!r.done()) {
        fail(fd, &conn->write_mu, ErrorCode::kProtocol, "malformed STATUS", peer);
        break;
      }
      Writer w;
      encode_status(w, status());
      std::lock_guard<std::mutex> lock(conn->write_mu);
      if (!write_frame(fd, MsgType::kStatusReply, w.bytes(), kWriteTimeoutMs).ok()) break;
    } else {
      fail(fd, &conn->write_mu, ErrorCode::kProtocol, "unexpected message type " + std::to_string(static_cast<int>(f.type)), peer);
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

void Tracker::Impl::handle(Fd conn, Admission admission) {
  int fd = conn.get();
  std::string peer = peer_host(fd);
  AcceptConfig cfg;
  cfg.auth_key = opts.auth_key;
  cfg.allowed_roles = (1u << static_cast<unsigned>(Role::kDeviceServer)) | (1u << static_cast<unsigned>(Role::kTrackerClient));
  cfg.deadline_ms = monotonic_ms() + opts.handshake_timeout_ms;
  AcceptedPeer hello;
  std::string why;
  if (!accept_handshake(fd, cfg, &hello, &why)) return log("connection from " + peer + " refused: " + why, true);
  admission.authenticated();
  if (admission.open() - counts->unauthenticated.load() > opts.max_connections)
    return fail(fd, nullptr, ErrorCode::kBusy, "too many connections", peer);
  ServerInfo info;
  info.arch = "tracker";
  if (!send_welcome(fd, opts.auth_key, hello, info, kWriteTimeoutMs).ok()) return;
  if (hello.role == Role::kDeviceServer)
    serve_device_server(fd, peer, !opts.auth_key.empty());
  else
    serve_tuner(fd, peer);
}

Tracker::Tracker(TrackerOptions opts) : impl_(std::make_shared<Impl>()) { impl_->opts = std::move(opts); }
Tracker::~Tracker() { stop(); }

bool Tracker::listen(std::string* error) {
  if (!check_listen_policy(impl_->opts.host, impl_->opts.auth_key, error)) return false;
  impl_->listener = listen_tcp(impl_->opts.host, impl_->opts.port, &impl_->bound_port, error);
  return impl_->listener.valid();
}

uint16_t Tracker::port() const { return impl_->bound_port; }
void Tracker::stop() { impl_->stopping = true; }

void Tracker::serve_authenticated(int fd, bool device_server) {
  const std::string peer = peer_host(fd);
  if (device_server) impl_->serve_device_server(fd, peer, !impl_->opts.auth_key.empty());
  else impl_->serve_tuner(fd, peer);
}

void Tracker::serve() {
  std::thread reaper([impl = impl_] { impl->reap_leases(); });
  accept_loop(impl_->listener.get(), impl_->stopping, impl_->counts, impl_->opts.max_unauthenticated,
              [impl = impl_](Fd conn, Admission admission) { impl->handle(std::move(conn), std::move(admission)); });
  reaper.join();
}

namespace {
std::atomic<bool> g_tracker_signalled{false};
void on_tracker_signal(int) { g_tracker_signalled = true; }
}  // namespace

int run_tracker(TrackerOptions o) {
  std::string error;
  if (o.auth_key.empty() && !load_auth_key(o.auth_key_file, &o.auth_key, &error)) {
    fprintf(stderr, "kiln tracker: %s\n", error.c_str());
    return 2;
  }
  if (!check_listen_policy(o.host, o.auth_key, &error)) {
    fprintf(stderr, "kiln tracker: %s\n", error.c_str());
    return 2;
  }
  Tracker tracker(o);
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
