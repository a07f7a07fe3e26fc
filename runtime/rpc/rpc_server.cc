// The device server: sessions from the shared accept loop, a private upload dir per session, candidates
// run by run_in_child(), and a tracker heartbeat thread.
#include "runtime/rpc/rpc_server.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>

#include "runtime/rpc/accept_loop.h"
#include "runtime/rpc/auth_key.h"
#include "runtime/rpc/handshake.h"
#include "runtime/rpc/net.h"
#include "runtime/rpc/protocol.h"
#include "runtime/rpc/rpc_client.h"
#include "runtime/rpc/run_module.h"

namespace kiln::rpc {

struct RpcServer::Impl {
  ServerOptions opts;
  Fd listener;
  uint16_t bound_port = 0;
  std::atomic<bool> stopping{false};
  std::shared_ptr<ConnectionCounts> counts = std::make_shared<ConnectionCounts>();
  std::atomic<int> sessions{0};  // authenticated sessions
  std::mutex log_mu;

  void log(const std::string& line, bool always = false) {
    if (!always && !opts.verbose) return;
    std::lock_guard<std::mutex> lock(log_mu);
    fprintf(stderr, "kiln-rpc-server: %s\n", line.c_str());
  }
};

namespace {

constexpr int kWriteTimeoutMs = 30000;

// "kiln-rpc-<pid>-": the prefix of this process's upload dirs, so a later server can tell whose they were.
std::string upload_dir_prefix(pid_t pid) { return "kiln-rpc-" + std::to_string(pid) + "-"; }

// The uploads of one session: a mkdtemp directory (0700) kiln-rpc-<pid>-XXXXXX holding m<id>.so files
// named by the server. Destruction removes the files and the directory, whatever way the session ended;
// remove_stale_upload_dirs() covers the way destructors do not run (SIGKILL, a power cut).
class UploadDir {
 public:
  explicit UploadDir(std::string parent) : parent_(std::move(parent)) {}
  ~UploadDir() {
    for (const auto& [id, path] : modules_) unlink(path.c_str());
    if (!dir_.empty()) rmdir(dir_.c_str());
  }
  // Stores bytes as a new module; returns its id, or -1 with `error` set.
  int64_t add(const uint8_t* data, size_t n, std::string* error) {
    if (modules_.size() >= kMaxModulesPerSession) return *error = "too many uploads in one session", -1;
    if (dir_.empty()) {
      std::string tmpl = parent_ + "/" + upload_dir_prefix(getpid()) + "XXXXXX";
      std::vector<char> buf(tmpl.begin(), tmpl.end());
      buf.push_back('\0');
      if (!mkdtemp(buf.data())) return *error = "mkdtemp in " + parent_ + ": " + strerror(errno), -1;
      dir_ = buf.data();
    }
    uint32_t id = next_id_++;
    std::string path = dir_ + "/m" + std::to_string(id) + ".so";
    Fd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!fd.valid()) return *error = "create upload: " + std::string(strerror(errno)), -1;
    modules_[id] = path;
    size_t done = 0;
    while (done < n) {
      ssize_t w = write(fd.get(), data + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return *error = "write upload: " + std::string(strerror(errno)), -1;
      done += static_cast<size_t>(w);
    }
    return id;
  }
  const std::string* find(uint32_t id) const {
    auto it = modules_.find(id);
    return it == modules_.end() ? nullptr : &it->second;
  }

 private:
  std::string parent_, dir_;
  uint32_t next_id_ = 1;
  std::map<uint32_t, std::string> modules_;
};

std::string work_parent(const ServerOptions& o) {
  if (!o.work_dir.empty()) return o.work_dir;
  const char* t = getenv("TMPDIR");
  return (t && *t) ? t : "/tmp";
}

// Decrements a counter when the scope ends.
struct CountGuard {
  std::atomic<int>& n;
  explicit CountGuard(std::atomic<int>& c) : n(c) { ++n; }
  ~CountGuard() { --n; }
};

// Runs one session from preamble to close. Every rejection sends a typed error (or preamble status)
// first so the client can tell what it did wrong, then drains and returns, which closes the socket.
void run_session(RpcServer::Impl& s, Fd conn, Admission admission) {
  const ServerOptions& o = s.opts;
  int fd = conn.get();
  std::string peer = peer_host(fd);
  auto reject = [&](ErrorCode code, const std::string& why) {
    s.log("session from " + peer + " rejected (" + error_code_name(code) + "): " + why, true);
    send_error(fd, code, why);
    drain_before_close(fd);
  };

  AcceptConfig cfg;
  cfg.auth_key = o.auth_key;
  cfg.allowed_roles = 1u << static_cast<unsigned>(Role::kClient);
  cfg.deadline_ms = monotonic_ms() + o.handshake_timeout_ms;
  AcceptedPeer hello;
  std::string why;
  if (!accept_handshake(fd, cfg, &hello, &why)) return s.log("connection from " + peer + " refused: " + why, true);
  admission.authenticated();
  CountGuard session_count(s.sessions);
  if (s.sessions.load() > o.max_sessions) return reject(ErrorCode::kBusy, "too many concurrent sessions");
  ServerInfo info;
  info.arch = server_arch();
  info.key = o.key;
  info.session_timeout_ms = static_cast<uint32_t>(o.session_timeout_ms);
  info.max_upload_bytes = kMaxUploadBytes;
  info.max_run_timeout_ms = o.max_run_timeout_ms;
  if (!send_welcome(fd, o.auth_key, hello, info, kWriteTimeoutMs).ok()) return;
  s.log("session from " + peer + " (" + hello.name + ") started");

  Frame f;
  IoStatus io;
  UploadDir uploads(work_parent(o));
  for (;;) {
    io = read_frame(fd, &f, o.session_timeout_ms, o.frame_timeout_ms);
    if (io.kind == IoStatus::kTimeout)
      return reject(ErrorCode::kSessionTimeout, "idle for " + std::to_string(o.session_timeout_ms) + " ms");
    if (io.kind == IoStatus::kClosed) return s.log("session from " + peer + " closed by the client");
    if (io.kind == IoStatus::kTooLarge) return reject(ErrorCode::kTooLarge, io.message);
    if (!io.ok()) return reject(ErrorCode::kProtocol, io.message);
    Reader r(f.body);
    switch (f.type) {
      case MsgType::kUpload: {
        std::string name = r.str();
        auto [data, n] = r.blob(kMaxUploadBytes);
        if (!r.ok() && f.body.size() > kMaxUploadBytes) return reject(ErrorCode::kTooLarge, "upload over the limit");
        if (!r.done()) return reject(ErrorCode::kProtocol, "malformed UPLOAD");
        if (!is_valid_upload_name(name)) return reject(ErrorCode::kBadName, "upload name '" + name + "' is not a plain file name");
        std::string error;
        int64_t id = uploads.add(data, n, &error);
        if (id < 0) return reject(ErrorCode::kInternal, error);
        Writer w;
        w.u32(static_cast<uint32_t>(id));
        if (!write_frame(fd, MsgType::kUploaded, w.bytes(), kWriteTimeoutMs).ok()) return;
        s.log("session from " + peer + ": uploaded '" + name + "' as module " + std::to_string(id) + " (" +
              std::to_string(n) + " bytes)");
        break;
      }
      case MsgType::kRun: {
        RunSpec spec;
        std::string why;
        bool too_large = false;
        if (!decode_run_spec(r, &spec, &why, &too_large))
          return reject(too_large ? ErrorCode::kTooLarge : ErrorCode::kProtocol, why);
        const std::string* path = uploads.find(spec.module);
        if (!path) return reject(ErrorCode::kNoModule, "no module " + std::to_string(spec.module) + " in this session");
        spec.run_timeout_ms = std::min(spec.run_timeout_ms, o.max_run_timeout_ms);
        RunOutcome out = run_in_child(*path, spec);
        s.log("session from " + peer + ": ran " + spec.func + ": " + run_status_name(out.status) +
              (out.message.empty() ? "" : " (" + out.message + ")"));
        Writer w;
        encode_run_outcome(w, out);
        if (!write_frame(fd, MsgType::kResult, w.bytes(), kWriteTimeoutMs).ok()) return;
        break;
      }
      case MsgType::kBye: return s.log("session from " + peer + " ended");
      default: return reject(ErrorCode::kProtocol, "unexpected message type " + std::to_string(static_cast<int>(f.type)));
    }
  }
}

// Keeps this server registered with the tracker: register, then heartbeat every heartbeat_ms; on any
// failure wait a second and start over, so a restarted tracker gets the server back.
void tracker_loop(std::shared_ptr<RpcServer::Impl> s) {
  const ServerOptions& o = s->opts;
  std::string host;
  uint16_t port = 0;
  if (!parse_host_port(o.tracker, &host, &port)) {
    s->log("bad --tracker '" + o.tracker + "' (expected host:port)", true);
    return;
  }
  bool warned = false;
  ConnectOptions copts;
  copts.auth_key = o.auth_key;
  copts.client_name = std::string("kiln-rpc-server ") + server_arch();
  copts.io_timeout_ms = 5000;
  while (!s->stopping) {
    std::string error;
    Frame f;
    Writer reg;
    reg.str(o.key);
    reg.str(o.advertise_host);
    reg.u16(s->bound_port);
    Expected<Fd> conn = connect_authenticated(host, port, Role::kDeviceServer, copts, nullptr);
    Fd fd;
    if (conn.ok()) fd = std::move(conn.value());
    else error = conn.error().message;
    bool ok = fd.valid() && write_frame(fd.get(), MsgType::kRegister, reg.bytes(), 5000).ok();
    if (ok) {
      IoStatus io = read_frame(fd.get(), &f, 5000, 5000, 4096);
      ok = io.ok() && f.type == MsgType::kRegistered;
      if (io.ok() && f.type == MsgType::kError) {
        Reader r(f.body);
        ErrorCode code = static_cast<ErrorCode>(r.u8());
        error = std::string("rejected (") + error_code_name(code) + "): " + r.str();
      }
    }
    if (ok) {
      s->log("registered with tracker " + o.tracker + " under key '" + o.key + "'", true);
      warned = false;
      while (!s->stopping && ok) {
        int64_t until = monotonic_ms() + o.heartbeat_ms;
        while (!s->stopping && monotonic_ms() < until) {
          // The tracker never writes unprompted; readable means it closed (or broke) the connection.
          if (wait_readable(fd.get(), 50) != 0) {
            ok = false;
            break;
          }
        }
        if (ok && !s->stopping) ok = write_frame(fd.get(), MsgType::kHeartbeat, {}, 5000).ok();
      }
      if (!s->stopping) s->log("lost the tracker " + o.tracker + "; reconnecting", true);
    } else if (!warned) {
      s->log("cannot register with tracker " + o.tracker + (error.empty() ? "" : ": " + error) + "; retrying", true);
      warned = true;
    }
    for (int i = 0; i < 20 && !s->stopping; ++i) usleep(50000);
  }
}

std::atomic<bool> g_signalled{false};
void on_signal(int) { g_signalled = true; }

}  // namespace

const char* server_arch() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#elif defined(__arm__)
  return "arm";
#else
  return "unknown";
#endif
}

RpcServer::RpcServer(ServerOptions opts) : impl_(std::make_shared<Impl>()) { impl_->opts = std::move(opts); }

RpcServer::~RpcServer() { stop(); }

bool RpcServer::listen(std::string* error) {
  if (!check_listen_policy(impl_->opts.host, impl_->opts.auth_key, error)) return false;
  impl_->listener = listen_tcp(impl_->opts.host, impl_->opts.port, &impl_->bound_port, error);
  if (!impl_->listener.valid()) return false;
  int removed = remove_stale_upload_dirs(work_parent(impl_->opts));
  if (removed > 0) impl_->log("removed " + std::to_string(removed) + " upload dir(s) left by killed servers", true);
  return true;
}

uint16_t RpcServer::port() const { return impl_->bound_port; }

void RpcServer::stop() { impl_->stopping = true; }

void RpcServer::serve() {
  std::thread tracker;
  if (!impl_->opts.tracker.empty()) tracker = std::thread(tracker_loop, impl_);
  accept_loop(impl_->listener.get(), impl_->stopping, impl_->counts, impl_->opts.max_unauthenticated,
              [impl = impl_](Fd conn, Admission admission) { run_session(*impl, std::move(conn), std::move(admission)); });
  if (tracker.joinable()) tracker.join();
}

int remove_stale_upload_dirs(const std::string& parent) {
  DIR* d = opendir(parent.c_str());
  if (!d) return 0;
  int removed = 0;
  const std::string any_prefix = "kiln-rpc-";
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.compare(0, any_prefix.size(), any_prefix) != 0) continue;
    // kiln-rpc-<pid>-XXXXXX: digits up to the next '-'.
    size_t dash = name.find('-', any_prefix.size());
    if (dash == std::string::npos || dash == any_prefix.size() || dash - any_prefix.size() > 9) continue;
    long pid = 0;
    bool digits = true;
    for (size_t i = any_prefix.size(); i < dash; ++i) {
      if (name[i] < '0' || name[i] > '9') digits = false;
      else pid = pid * 10 + (name[i] - '0');
    }
    if (!digits || pid <= 0) continue;
    bool alive = kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
    if (alive && pid != getpid()) continue;
    // Only our own plain directories, opened without following links; only their regular files go.
    int dfd = openat(dirfd(d), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) continue;
    struct stat st;
    if (fstat(dfd, &st) != 0 || st.st_uid != geteuid()) {
      close(dfd);
      continue;
    }
    if (DIR* inner = fdopendir(dfd)) {
      while (dirent* f = readdir(inner)) {
        struct stat fs;
        if (fstatat(dfd, f->d_name, &fs, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(fs.st_mode)) unlinkat(dfd, f->d_name, 0);
      }
      closedir(inner);  // closes dfd
    } else {
      close(dfd);
    }
    if (unlinkat(dirfd(d), name.c_str(), AT_REMOVEDIR) == 0) ++removed;
  }
  closedir(d);
  return removed;
}

int rpc_server_main(int argc, char** argv) {
  ServerOptions o;
  auto usage = [&] {
    fprintf(stderr,
            "usage: %s [--host H] [--port P] [--auth-key-file F] [--tracker H:P --key K] [--advertise-host H]\n"
            "          [--session-timeout MS] [--max-run-timeout MS] [--max-sessions N] [--work-dir D]\n"
            "          [--handshake-timeout MS] [--max-unauthenticated N] [-v]\n"
            "  --host defaults to 127.0.0.1; any other address needs an auth key (--auth-key-file F, or $%s).\n",
            argv[0], kAuthKeyEnv);
    return 2;
  };
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        fprintf(stderr, "%s: %s needs a value\n", argv[0], name);
        return nullptr;
      }
      return argv[++i];
    };
    auto number = [&](const char* name, long lo, long hi, long* out) {
      const char* v = value(name);
      if (!v) return false;
      char* end = nullptr;
      long n = strtol(v, &end, 10);
      if (*v == '\0' || *end != '\0' || n < lo || n > hi) {
        fprintf(stderr, "%s: bad %s '%s'\n", argv[0], name, v);
        return false;
      }
      *out = n;
      return true;
    };
    long n = 0;
    const char* v = nullptr;
    if (a == "--host" && (v = value("--host"))) o.host = v;
    else if (a == "--port" && number("--port", 0, 65535, &n)) o.port = static_cast<uint16_t>(n);
    else if (a == "--tracker" && (v = value("--tracker"))) o.tracker = v;
    else if (a == "--key" && (v = value("--key"))) o.key = v;
    else if (a == "--advertise-host" && (v = value("--advertise-host"))) o.advertise_host = v;
    else if (a == "--auth-key-file" && (v = value("--auth-key-file"))) o.auth_key_file = v;
    else if (a == "--handshake-timeout" && number("--handshake-timeout", 1, 600000, &n)) o.handshake_timeout_ms = static_cast<int>(n);
    else if (a == "--max-unauthenticated" && number("--max-unauthenticated", 1, 100000, &n)) o.max_unauthenticated = static_cast<int>(n);
    else if (a == "--work-dir" && (v = value("--work-dir"))) o.work_dir = v;
    else if (a == "--session-timeout" && number("--session-timeout", 1, 86400000, &n)) o.session_timeout_ms = static_cast<int>(n);
    else if (a == "--max-run-timeout" && number("--max-run-timeout", 1, 86400000, &n)) o.max_run_timeout_ms = static_cast<uint32_t>(n);
    else if (a == "--max-sessions" && number("--max-sessions", 1, 100000, &n)) o.max_sessions = static_cast<int>(n);
    else if (a == "-v" || a == "--verbose") o.verbose = true;
    else if (a == "-h" || a == "--help") return usage(), 0;
    else return usage();
  }
  if (!o.tracker.empty() && o.key.empty()) {
    fprintf(stderr, "%s: --tracker needs --key\n", argv[0]);
    return 2;
  }
  return run_rpc_server(o);
}

int run_rpc_server(ServerOptions o) {
  std::string error;
  if (o.auth_key.empty() && !load_auth_key(o.auth_key_file, &o.auth_key, &error)) {
    fprintf(stderr, "kiln-rpc-server: %s\n", error.c_str());
    return 2;
  }
  if (!check_listen_policy(o.host, o.auth_key, &error)) {
    fprintf(stderr, "kiln-rpc-server: %s\n", error.c_str());
    return 2;
  }
  RpcServer server(o);
  if (!server.listen(&error)) {
    fprintf(stderr, "kiln-rpc-server: %s\n", error.c_str());
    return 1;
  }
  printf("kiln-rpc-server (%s) listening on %s:%u\n", server_arch(), o.host.c_str(), server.port());
  fflush(stdout);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::thread watcher([&] {
    while (!g_signalled) usleep(100000);
    server.stop();
  });
  server.serve();
  watcher.join();
  return 0;
}

}  // namespace kiln::rpc
