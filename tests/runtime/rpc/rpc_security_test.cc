// The RPC runtime on a hostile network (all of it on loopback): who may upload and run, what crosses
// the wire, what a flood of connections or oversized frame headers costs the server, leases that
// expire, a bounded request queue, and upload dirs a killed server left behind.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "runtime/rpc/auth_key.h"
#include "runtime/rpc/handshake.h"
#include "runtime/rpc/net.h"
#include "runtime/rpc/rpc_client.h"
#include "runtime/rpc/rpc_server.h"
#include "runtime/rpc/tracker.h"
#include "tests/runtime/rpc/rpc_test_util.h"

namespace kiln::rpc::test {
namespace {

namespace fs = std::filesystem;

const std::string kKey = "correct horse battery staple 42";

// Writes the auth key file (mode 0600) into dir; returns its path.
std::string write_key_file(const std::string& dir, const std::string& key, mode_t mode = 0600) {
  std::string path = dir + "/auth.key";
  std::ofstream(path) << key << "\n";
  chmod(path.c_str(), mode);
  return path;
}

// A field of /proc/<pid>/status ("VmRSS", "Threads") as a number (kB for sizes); -1 when missing.
long proc_status(pid_t pid, const std::string& field) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field + ":", 0) == 0) return std::atol(line.c_str() + field.size() + 1);
  return -1;
}

// Runs argv to completion (at most timeout_ms, then SIGKILL) and returns {exit code, stderr}.
std::pair<int, std::string> run_to_exit(std::vector<std::string> argv, int timeout_ms = 10000) {
  int err[2];
  if (pipe(err) != 0) return {-1, ""};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(err[1], 2);
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
    close(err[0]);
    close(err[1]);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(err[1]);
  std::string text;
  int64_t deadline = monotonic_ms() + timeout_ms;
  char buf[256];
  for (;;) {
    int left = static_cast<int>(std::max<int64_t>(0, deadline - monotonic_ms()));
    if (wait_readable(err[0], left) <= 0) break;
    ssize_t n = read(err[0], buf, sizeof buf);
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(err[0]);
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) == 0) {
    for (int i = 0; i < 50 && waitpid(pid, &status, WNOHANG) == 0; ++i) usleep(20000);
    if (kill(pid, 0) == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return {-1, text + "(killed: did not exit)"};
    }
  }
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
}

// A TCP relay on 127.0.0.1 that records every byte in both directions of one connection.
class RecordingProxy {
 public:
  explicit RecordingProxy(uint16_t upstream) {
    std::string error;
    listener_ = listen_tcp("127.0.0.1", 0, &port_, &error);
    EXPECT_TRUE(listener_.valid()) << error;
    thread_ = std::thread([this, upstream] { relay(upstream); });
  }
  ~RecordingProxy() {
    stop_ = true;
    thread_.join();
  }
  uint16_t port() const { return port_; }
  std::string sent() {
    std::lock_guard<std::mutex> lock(mu_);
    return up_;
  }
  std::string received() {
    std::lock_guard<std::mutex> lock(mu_);
    return down_;
  }

 private:
  void relay(uint16_t upstream) {
    int64_t deadline = monotonic_ms() + 30000;
    while (!stop_ && monotonic_ms() < deadline && wait_readable(listener_.get(), 50) <= 0) {
    }
    if (stop_ || monotonic_ms() >= deadline) return;
    Fd client(accept(listener_.get(), nullptr, nullptr));
    std::string error;
    Fd server = connect_tcp("127.0.0.1", upstream, 5000, &error);
    if (!client.valid() || !server.valid()) return;
    char buf[65536];
    while (!stop_ && monotonic_ms() < deadline) {
      pollfd p[2] = {{client.get(), POLLIN, 0}, {server.get(), POLLIN, 0}};
      if (poll(p, 2, 50) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = read(p[i].fd, buf, sizeof buf);
        if (n <= 0) return;
        {
          std::lock_guard<std::mutex> lock(mu_);
          (i == 0 ? up_ : down_).append(buf, static_cast<size_t>(n));
        }
        if (write_full(i == 0 ? server.get() : client.get(), buf, static_cast<size_t>(n), 5000) != IoResult::kOk) return;
      }
    }
  }

  Fd listener_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::string up_, down_;
};

class RpcSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    so_ = build_kernels(KILN_HOST_CC, dir_.path(), "kernels");
    ASSERT_FALSE(so_.empty()) << "could not compile the test kernels";
    key_file_ = write_key_file(dir_.path(), kKey);
    work_ = dir_.path() + "/work";
    fs::create_directories(work_);
  }
  TempDir dir_;
  std::string so_, key_file_, work_;
};

// ---- binding --------------------------------------------------------------------------------------

TEST_F(RpcSecurityTest, DefaultBindIsLoopback) {
  EXPECT_EQ(ServerOptions{}.host, "127.0.0.1");
  EXPECT_EQ(TrackerOptions{}.host, "127.0.0.1");
  Process server({host_server_binary(), "--work-dir", work_});
  ASSERT_TRUE(server.started());
  // The socket itself: /proc/net/tcp lists it as 0100007F:<port> (127.0.0.1), not 00000000.
  char want[32];
  snprintf(want, sizeof want, "0100007F:%04X", server.port());
  std::ifstream tcp("/proc/net/tcp");
  std::stringstream all;
  all << tcp.rdbuf();
  EXPECT_NE(all.str().find(want), std::string::npos) << "no listener on 127.0.0.1:" << server.port();
  char wildcard[32];
  snprintf(wildcard, sizeof wildcard, "00000000:%04X", server.port());
  EXPECT_EQ(all.str().find(wildcard), std::string::npos);
  expect_good_session(server.port(), so_);
}

TEST_F(RpcSecurityTest, NonLoopbackHostWithoutKeyExitsTwo) {
  EXPECT_TRUE(is_loopback_host("127.0.0.1"));
  EXPECT_TRUE(is_loopback_host("::1"));
  EXPECT_TRUE(is_loopback_host("localhost"));
  EXPECT_FALSE(is_loopback_host("0.0.0.0"));
  EXPECT_FALSE(is_loopback_host(""));
  // 0.0.0.0 only as a bind address the server must refuse; nothing connects to it.
  auto [rc, err] = run_to_exit({host_server_binary(), "--host", "0.0.0.0", "--port", "0", "--work-dir", work_});
  EXPECT_EQ(rc, 2) << err;
  EXPECT_NE(err.find("auth key"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << "not one line: " << err;
  // A key file others can read is refused too (the key would not be secret).
  fs::create_directories(dir_.path() + "/open");
  std::string open_key = write_key_file(dir_.path() + "/open", "0123456789abcdef0123", 0644);
  std::tie(rc, err) = run_to_exit({host_server_binary(), "--auth-key-file", open_key, "--port", "0"});
  EXPECT_EQ(rc, 2) << err;
  EXPECT_NE(err.find("readable by others"), std::string::npos) << err;
  // And so is a key too short to resist guessing.
  fs::create_directories(dir_.path() + "/short");
  std::string short_key = write_key_file(dir_.path() + "/short", "short");
  std::tie(rc, err) = run_to_exit({host_server_binary(), "--auth-key-file", short_key, "--port", "0"});
  EXPECT_EQ(rc, 2) << err;
  EXPECT_NE(err.find("at least"), std::string::npos) << err;
}

// ---- authentication -------------------------------------------------------------------------------

TEST_F(RpcSecurityTest, ClientWithoutTheKeyCannotUploadOrRun) {
  Process server({host_server_binary(), "--auth-key-file", key_file_, "--work-dir", work_});
  ASSERT_TRUE(server.started());
  for (std::string bad : {std::string(), std::string("wrong key, 16+ bytes long"), kKey + "x", kKey.substr(1)}) {
    ConnectOptions opts;
    opts.auth_key = bad;
    auto s = Session::connect("127.0.0.1", server.port(), opts);
    ASSERT_FALSE(s.ok()) << "key '" << bad << "' accepted";
    EXPECT_EQ(s.error().kind, ClientError::kRejected) << s.error().message;
    EXPECT_EQ(s.error().server_code, ErrorCode::kAuth) << s.error().message;
  }
  // Skipping HELLO and sending an UPLOAD straight after the CHALLENGE gets nowhere either.
  {
    std::string error;
    Fd fd = connect_tcp("127.0.0.1", server.port(), 5000, &error);
    ASSERT_TRUE(fd.valid()) << error;
    ASSERT_TRUE(write_preamble(fd.get(), static_cast<uint16_t>(Role::kClient), 2000).ok());
    uint8_t magic[4];
    uint16_t version, status;
    ASSERT_TRUE(read_preamble(fd.get(), magic, &version, &status, 5000).ok());
    Frame f;
    ASSERT_TRUE(read_frame(fd.get(), &f, 5000, 5000).ok());
    EXPECT_EQ(f.type, MsgType::kChallenge);
    Writer up;
    up.str("x.so");
    std::vector<uint8_t> bytes = read_bytes(so_);
    up.blob(bytes.data(), bytes.size());
    (void)write_frame(fd.get(), MsgType::kUpload, up.bytes(), 5000);
    ASSERT_TRUE(read_frame(fd.get(), &f, 5000, 5000).ok());
    EXPECT_EQ(f.type, MsgType::kError);
    Reader r(f.body);
    EXPECT_EQ(static_cast<ErrorCode>(r.u8()), ErrorCode::kTooLarge);  // over the 4 KiB pre-auth limit
  }
  EXPECT_TRUE(fs::is_empty(work_)) << "an unauthenticated client got an upload dir";
  expect_good_session(server.port(), so_, kKey);
}

TEST_F(RpcSecurityTest, KeyFromTheEnvironmentWorks) {
  setenv(kAuthKeyEnv, kKey.c_str(), 1);
  Process server({host_server_binary(), "--work-dir", work_});
  unsetenv(kAuthKeyEnv);
  ASSERT_TRUE(server.started());
  auto s = Session::connect("127.0.0.1", server.port());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().server_code, ErrorCode::kAuth);
  expect_good_session(server.port(), so_, kKey);
}

TEST_F(RpcSecurityTest, KeyNeverCrossesTheWire) {
  Process server({host_server_binary(), "--auth-key-file", key_file_, "--work-dir", work_});
  ASSERT_TRUE(server.started());
  RecordingProxy proxy(server.port());
  expect_good_session(proxy.port(), so_, kKey);
  std::string up = proxy.sent(), down = proxy.received();
  EXPECT_GT(up.size(), 1000u) << "the proxy saw no session";
  EXPECT_EQ(up.find(kKey), std::string::npos) << "the key is in the client's bytes";
  EXPECT_EQ(down.find(kKey), std::string::npos) << "the key is in the server's bytes";
  EXPECT_EQ(up.find(kKey.substr(0, 8)), std::string::npos) << "part of the key is in the client's bytes";
}

// A server that answers the handshake without knowing the key: the client refuses its WELCOME.
TEST_F(RpcSecurityTest, ImpostorServerIsDetected) {
  std::string error;
  uint16_t port = 0;
  Fd listener = listen_tcp("127.0.0.1", 0, &port, &error);
  ASSERT_TRUE(listener.valid()) << error;
  std::thread impostor([&] {
    if (wait_readable(listener.get(), 10000) <= 0) return;
    Fd c(accept(listener.get(), nullptr, nullptr));
    uint8_t magic[4];
    uint16_t version, role;
    if (!read_preamble(c.get(), magic, &version, &role, 5000).ok()) return;
    write_preamble(c.get(), 0, 2000);
    Writer challenge;
    challenge.raw(std::string(kNonceBytes, 'n').data(), kNonceBytes);
    write_frame(c.get(), MsgType::kChallenge, challenge.bytes(), 2000);
    Frame f;
    if (!read_frame(c.get(), &f, 5000, 5000, 4096).ok()) return;
    Writer welcome;
    welcome.raw(std::string(kProofBytes, 'p').data(), kProofBytes);  // cannot compute the real proof
    encode_server_info(welcome, ServerInfo{"x86_64", "", 60000, kMaxUploadBytes, 600000});
    write_frame(c.get(), MsgType::kWelcome, welcome.bytes(), 2000);
    wait_readable(c.get(), 2000);
  });
  ConnectOptions opts;
  opts.auth_key = kKey;
  auto s = Session::connect("127.0.0.1", port, opts);
  impostor.join();
  ASSERT_FALSE(s.ok()) << "the client trusted a server that does not know the key";
  EXPECT_EQ(s.error().kind, ClientError::kHandshake);
  EXPECT_EQ(s.error().server_code, ErrorCode::kAuth);
}

// ---- the tracker ----------------------------------------------------------------------------------

// Registers under `key` advertising `host` ("" = as seen); returns the connection (the registration
// lasts while it is open) or, when refused, an invalid Fd with *error_code set.
Fd try_register(uint16_t tracker, const std::string& auth_key, const std::string& device_key, const std::string& host,
                ErrorCode* error_code) {
  ConnectOptions opts;
  opts.auth_key = auth_key;
  auto fd = connect_authenticated("127.0.0.1", tracker, Role::kDeviceServer, opts, nullptr);
  if (!fd.ok()) {
    *error_code = fd.error().server_code;
    return Fd();
  }
  Writer reg;
  reg.str(device_key);
  reg.str(host);
  reg.u16(1);
  Frame f;
  write_frame(fd.value().get(), MsgType::kRegister, reg.bytes(), 2000);
  if (!read_frame(fd.value().get(), &f, 5000, 5000).ok()) return Fd();
  if (f.type == MsgType::kError) {
    Reader r(f.body);
    *error_code = static_cast<ErrorCode>(r.u8());
    return Fd();
  }
  return f.type == MsgType::kRegistered ? std::move(fd.value()) : Fd();
}

TEST_F(RpcSecurityTest, TrackerRefusesServersAndTunersWithoutTheKey) {
  TrackerOptions o;
  o.auth_key = kKey;
  TrackerThread tracker(o);
  for (std::string bad : {std::string(), std::string("wrong key, 16+ bytes long")}) {
    ErrorCode code = ErrorCode::kProtocol;
    Fd reg = try_register(tracker.port(), bad, "board", "", &code);
    EXPECT_FALSE(reg.valid()) << "REGISTER with key '" << bad << "' accepted";
    EXPECT_EQ(code, ErrorCode::kAuth);
    ConnectOptions opts;
    opts.auth_key = bad;
    auto t = TrackerClient::connect("127.0.0.1", tracker.port(), opts);
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.error().server_code, ErrorCode::kAuth);
  }
  // A real server with the right key registers and serves; one without it never gets in.
  Process nokey({host_server_binary(), "--tracker", "127.0.0.1:" + std::to_string(tracker.port()), "--key", "board",
                 "--work-dir", work_});
  Process good({host_server_binary(), "--auth-key-file", key_file_, "--tracker",
                "127.0.0.1:" + std::to_string(tracker.port()), "--key", "board", "--work-dir", work_});
  ASSERT_TRUE(nokey.started() && good.started());
  ASSERT_TRUE(wait_for_servers(tracker.port(), "board", 1, kKey));
  ConnectOptions opts;
  opts.auth_key = kKey;
  auto t = TrackerClient::connect("127.0.0.1", tracker.port(), opts);
  ASSERT_TRUE(t.ok()) << t.error().message;
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the keyless server retries every second
  auto st = t->status();
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st.value().size(), 1u);
  EXPECT_EQ(st.value()[0].total, 1u) << "the server without the key registered";
  auto lease = t->request("board", 0, 5000);
  ASSERT_TRUE(lease.ok()) << lease.error().message;
  EXPECT_EQ(lease->port, good.port());
  expect_good_session(lease->port, so_, kKey);
}

TEST_F(RpcSecurityTest, RegisterForAnotherHostNeedsTheKey) {
  {
    TrackerThread keyless(TrackerOptions{});
    ErrorCode code = ErrorCode::kProtocol;
    EXPECT_FALSE(try_register(keyless.port(), "", "board", "192.0.2.7", &code).valid());
    EXPECT_EQ(code, ErrorCode::kAuth);
    Fd same = try_register(keyless.port(), "", "board", "127.0.0.1", &code);  // naming itself is fine
    EXPECT_TRUE(same.valid());
  }
  TrackerOptions o;
  o.auth_key = kKey;
  TrackerThread keyed(o);
  ErrorCode code = ErrorCode::kProtocol;
  Fd reg = try_register(keyed.port(), kKey, "board", "192.0.2.7", &code);
  ASSERT_TRUE(reg.valid()) << "an authenticated server may advertise another host";
  ConnectOptions opts;
  opts.auth_key = kKey;
  auto t = TrackerClient::connect("127.0.0.1", keyed.port(), opts);
  ASSERT_TRUE(t.ok());
  auto lease = t->request("board", 0, 2000);  // nothing connects to the advertised address
  ASSERT_TRUE(lease.ok()) << lease.error().message;
  EXPECT_EQ(lease->host, "192.0.2.7");
}

TEST_F(RpcSecurityTest, LeaseExpiresAndGoesToTheNextRequester) {
  TrackerOptions o;
  o.lease_timeout_ms = 500;
  TrackerThread tracker(o);
  ErrorCode code;
  Fd reg = try_register(tracker.port(), "", "board", "", &code);
  ASSERT_TRUE(reg.valid());
  // Heartbeats keep the fake server in the pool for the whole test.
  std::atomic<bool> done{false};
  std::thread beats([&] {
    for (int i = 0; i < 100 && !done; ++i) {
      write_frame(reg.get(), MsgType::kHeartbeat, {}, 1000);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  auto hog = TrackerClient::connect("127.0.0.1", tracker.port());
  ASSERT_TRUE(hog.ok());
  auto held = hog->request("board", 0, 2000);
  ASSERT_TRUE(held.ok()) << held.error().message;
  auto next = TrackerClient::connect("127.0.0.1", tracker.port());
  ASSERT_TRUE(next.ok());
  int64_t t0 = monotonic_ms();
  auto got = next->request("board", 0, 5000);  // the hog never releases and stays connected
  int64_t waited = monotonic_ms() - t0;
  done = true;
  beats.join();
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_GE(waited, 300) << "handed over before the lease timeout";
  EXPECT_LT(waited, 3000);
  EXPECT_NE(got->id, held->id);
  EXPECT_TRUE(hog->release(held.value()));  // releasing an expired lease is harmless
  auto st = next->status();
  ASSERT_TRUE(st.ok());
  ASSERT_EQ(st.value().size(), 1u);
  EXPECT_EQ(st.value()[0].free, 0u) << "the expired lease's late RELEASE freed the new holder's device";
}

TEST_F(RpcSecurityTest, FullRequestQueueAnswersBusy) {
  TrackerOptions o;
  o.max_pending = 3;
  TrackerThread tracker(o);
  auto a = TrackerClient::connect("127.0.0.1", tracker.port());
  ASSERT_TRUE(a.ok());
  for (int i = 0; i < 3; ++i) {
    auto l = a->request("none", 0, 50);  // times out but stays queued
    ASSERT_FALSE(l.ok());
    EXPECT_EQ(l.error().kind, ClientError::kTimeout);
  }
  auto b = TrackerClient::connect("127.0.0.1", tracker.port());
  ASSERT_TRUE(b.ok());
  auto l = b->request("none", 0, 2000);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().kind, ClientError::kRejected) << l.error().message;
  EXPECT_EQ(l.error().server_code, ErrorCode::kBusy) << l.error().message;

  // One connection alone cannot fill a large queue either.
  TrackerThread big(TrackerOptions{});
  auto c = TrackerClient::connect("127.0.0.1", big.port());
  ASSERT_TRUE(c.ok());
  int queued = 0;
  ErrorCode last = ErrorCode::kProtocol;
  for (int i = 0; i < kMaxPendingPerTuner + 5; ++i) {
    auto r = c->request("none", 0, 1);
    if (r.error().kind == ClientError::kRejected) {
      last = r.error().server_code;
      break;
    }
    ++queued;
  }
  EXPECT_EQ(queued, kMaxPendingPerTuner);
  EXPECT_EQ(last, ErrorCode::kBusy);
}

// ---- resource bounds ------------------------------------------------------------------------------

TEST_F(RpcSecurityTest, HugeFrameHeadersDoNotCostMemory) {
  Process server({host_server_binary(), "--work-dir", work_});
  ASSERT_TRUE(server.started());
  expect_good_session(server.port(), so_);  // warm up: first-session allocations are not the probe's
  long before = proc_status(server.pid(), "VmRSS");
  ASSERT_GT(before, 0);
  constexpr int kConnections = 8;
  std::vector<Fd> conns;
  for (int i = 0; i < kConnections; ++i) {
    Fd fd = raw_session(server.port());
    ASSERT_TRUE(fd.valid());
    uint32_t len = kMaxFrameBytes - 1;  // ~80 MiB announced, not one body byte sent
    uint8_t head[5] = {static_cast<uint8_t>(len), static_cast<uint8_t>(len >> 8), static_cast<uint8_t>(len >> 16),
                       static_cast<uint8_t>(len >> 24), static_cast<uint8_t>(MsgType::kUpload)};
    ASSERT_EQ(write_full(fd.get(), head, sizeof head, 2000), IoResult::kOk);
    conns.push_back(std::move(fd));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  long after = proc_status(server.pid(), "VmRSS");
  printf("server RSS %ld kB -> %ld kB with %d pending 80 MiB frames\n", before, after, kConnections);
  EXPECT_LT(after - before, 4 * 1024) << "RSS grew by " << (after - before) << " kB";
  // Before authentication the limit is 4 KiB: a big HELLO is refused at its header.
  std::string error;
  Fd fd = connect_tcp("127.0.0.1", server.port(), 5000, &error);
  ASSERT_TRUE(write_preamble(fd.get(), static_cast<uint16_t>(Role::kClient), 2000).ok());
  uint8_t magic[4];
  uint16_t version, status;
  ASSERT_TRUE(read_preamble(fd.get(), magic, &version, &status, 5000).ok());
  Frame f;
  ASSERT_TRUE(read_frame(fd.get(), &f, 5000, 5000).ok());
  uint32_t len = kMaxPreAuthFrameBytes + 1;
  uint8_t head[5] = {static_cast<uint8_t>(len), static_cast<uint8_t>(len >> 8), 0, 0, static_cast<uint8_t>(MsgType::kHello)};
  ASSERT_EQ(write_full(fd.get(), head, sizeof head, 2000), IoResult::kOk);
  ASSERT_TRUE(read_frame(fd.get(), &f, 5000, 5000).ok());
  ASSERT_EQ(f.type, MsgType::kError);
  Reader r(f.body);
  EXPECT_EQ(static_cast<ErrorCode>(r.u8()), ErrorCode::kTooLarge);
  conns.clear();
  expect_good_session(server.port(), so_);
}

TEST_F(RpcSecurityTest, UnauthenticatedConnectionsAreBounded) {
  constexpr int kCap = 4, kSilent = 12;
  Process server({host_server_binary(), "--work-dir", work_, "--max-unauthenticated", std::to_string(kCap),
                  "--handshake-timeout", "800"});
  ASSERT_TRUE(server.started());
  long threads_before = proc_status(server.pid(), "Threads");
  std::vector<Fd> silent;
  for (int i = 0; i < kSilent; ++i) {  // connect (the kernel completes it from the backlog), say nothing
    std::string error;
    silent.push_back(connect_tcp("127.0.0.1", server.port(), 5000, &error));
    ASSERT_TRUE(silent.back().valid()) << error;
  }
  long threads_max = 0;
  for (int i = 0; i < 20; ++i) {
    threads_max = std::max(threads_max, proc_status(server.pid(), "Threads"));
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  // +1: a handler leaves the count just before its thread is gone, so a sample may see one thread
  // finishing beside its successor. What matters is that 12 silent peers do not make 12 threads.
  EXPECT_LE(threads_max, threads_before + kCap + 1) << "more handshake threads than --max-unauthenticated";
  // Silent peers are dropped at the handshake deadline, in waves of kCap; a real client then gets in.
  int64_t t0 = monotonic_ms();
  ConnectOptions opts;
  opts.io_timeout_ms = 10000;
  auto s = Session::connect("127.0.0.1", server.port(), opts);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_LT(monotonic_ms() - t0, 8000);
  int closed = 0;
  for (Fd& fd : silent) {
    char c;
    if (wait_readable(fd.get(), 5000) > 0 && read(fd.get(), &c, 1) <= 0) ++closed;
  }
  EXPECT_EQ(closed, kSilent) << "silent connections outlived the handshake deadline";
  expect_good_session(server.port(), so_);
}

// ---- upload dirs ----------------------------------------------------------------------------------

TEST_F(RpcSecurityTest, UploadDirOfAKilledServerIsRemovedByTheNext) {
  std::string keep = work_ + "/kiln-rpc-" + std::to_string(getpid()) + "-livepid";  // a live pid: not ours to take
  fs::create_directories(keep);
  pid_t dead_pid = 0;
  {
    Process first({host_server_binary(), "--work-dir", work_});
    ASSERT_TRUE(first.started());
    dead_pid = first.pid();
    auto s = Session::connect("127.0.0.1", first.port());
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(s->upload("kernels.so", read_bytes(so_)).ok());
    first.kill();  // SIGKILL mid-session: no destructor runs
  }
  std::string prefix = "kiln-rpc-" + std::to_string(dead_pid) + "-";
  auto leftovers = [&] {
    int n = 0;
    for (const auto& e : fs::directory_iterator(work_)) n += e.path().filename().string().rfind(prefix, 0) == 0;
    return n;
  };
  ASSERT_EQ(leftovers(), 1) << "the killed server left no upload dir to clean (test premise)";
  Process second({host_server_binary(), "--work-dir", work_});
  ASSERT_TRUE(second.started());  // it cleans before it says it is listening
  EXPECT_EQ(leftovers(), 0) << "the next server on the work dir kept the killed one's uploads";
  EXPECT_TRUE(fs::exists(keep)) << "a dir of a live process was removed";
  expect_good_session(second.port(), so_);
}

}  // namespace
}  // namespace kiln::rpc::test
