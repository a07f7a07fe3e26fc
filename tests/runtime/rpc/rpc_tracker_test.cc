// The tracker with real device servers: a loopback pool of two x86-64 servers and one AArch64 server
// under QEMU measuring a batch, a server killed mid-batch, priorities, and dead-server detection.
#include <gtest/gtest.h>

#include <atomic>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "runtime/rpc/net.h"
#include "runtime/rpc/rpc_client.h"
#include "runtime/rpc/tracker.h"
#include "tests/runtime/rpc/rpc_test_util.h"

namespace kiln::rpc::test {
namespace {

// An in-process tracker on a free port, stopped and joined at destruction.
class LocalTracker {
 public:
  explicit LocalTracker(int heartbeat_timeout_ms = 3000) {
    TrackerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.heartbeat_timeout_ms = heartbeat_timeout_ms;
    tracker_ = std::make_unique<Tracker>(o);
    std::string error;
    ok_ = tracker_->listen(&error);
    EXPECT_TRUE(ok_) << error;
    if (ok_) thread_ = std::thread([this] { tracker_->serve(); });
  }
  ~LocalTracker() {
    tracker_->stop();
    if (thread_.joinable()) thread_.join();
  }
  uint16_t port() const { return tracker_->port(); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port()); }

  // Status of one key (zeros when the tracker does not know it).
  KeyStatus status(const std::string& key) {
    auto c = TrackerClient::connect("127.0.0.1", port());
    if (!c.ok()) return {};
    auto s = c->status();
    if (!s.ok()) return {};
    for (const auto& k : s.value())
      if (k.key == key) return k;
    return {};
  }
  // Waits until `key` has `total` servers; false after timeout_ms.
  bool wait_for_total(const std::string& key, uint32_t total, int timeout_ms) {
    int64_t deadline = monotonic_ms() + timeout_ms;
    while (monotonic_ms() < deadline) {
      if (status(key).total == total) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

 private:
  std::unique_ptr<Tracker> tracker_;
  std::thread thread_;
  bool ok_ = false;
};

std::vector<std::string> server_argv(const std::string& binary, const LocalTracker& t, const std::string& key) {
  return {binary, "--host", "127.0.0.1", "--tracker", t.address(), "--key", key};
}

struct Job {
  std::string key;
  uint64_t seed;
};

struct JobResult {
  RunError error = RunError::kNone;
  std::string message, server;
  bool correct = false;
  size_t costs = 0;
  bool costs_positive = false;
};

// Measures one job on a device of its key: request, connect, upload the key's .so, run, release.
JobResult measure(TrackerClient& tracker, const Job& job, const std::string& so, uint32_t min_repeat_ms) {
  JobResult out;
  auto lease = tracker.request(job.key, 0, 60000);
  if (!lease.ok()) {
    out.error = RunError::kConnection;
    out.message = "request: " + lease.error().message;
    return out;
  }
  out.server = lease->host + ":" + std::to_string(lease->port);
  ConnectOptions opts;
  opts.io_timeout_ms = 20000;
  auto s = Session::connect(lease->host, lease->port, opts);
  if (!s.ok()) {
    out.error = RunError::kConnection;
    out.message = "connect: " + s.error().message;
  } else if (auto m = s->upload("kernels.so", read_bytes(so)); !m.ok()) {
    out.error = RunError::kConnection;
    out.message = "upload: " + m.error().message;
  } else {
    RunRequest req = unary_request(m.value(), "scale2", job.seed);
    req.min_repeat_ms = min_repeat_ms;
    req.repeat = 2;
    RunResult r = s->run(req);
    out.error = r.error;
    out.message = r.message;
    out.costs = r.costs.size();
    out.costs_positive = !r.costs.empty();
    for (double c : r.costs) out.costs_positive &= c > 0;
    out.correct = r.error == RunError::kNone && r.outputs[1] == expected_scale2(job.seed);
  }
  tracker.release(lease.value());
  return out;
}

// Runs `jobs` on `workers` threads, each with its own tracker connection.
std::vector<JobResult> run_batch(const LocalTracker& t, const std::vector<Job>& jobs,
                                 const std::map<std::string, std::string>& so_by_key, int workers,
                                 uint32_t min_repeat_ms) {
  std::vector<JobResult> results(jobs.size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&] {
      auto tracker = TrackerClient::connect("127.0.0.1", t.port());
      if (!tracker.ok()) return;
      for (size_t i; (i = next++) < jobs.size();)
        results[i] = measure(tracker.value(), jobs[i], so_by_key.at(jobs[i].key), min_repeat_ms);
    });
  }
  for (auto& th : threads) th.join();
  return results;
}

// A batch over two x86-64 servers and, with `with_arm`, one AArch64 server under QEMU.
void batch_across_servers(bool with_arm) {
  TempDir dir;
  std::string x86_so = build_kernels(KILN_HOST_CC, dir.path(), "kernels_x86");
  ASSERT_FALSE(x86_so.empty());
  LocalTracker tracker;
  Process a(server_argv(host_server_binary(), tracker, "x86_64"));
  Process b(server_argv(host_server_binary(), tracker, "x86_64"));
  ASSERT_TRUE(a.started() && b.started());

  std::map<std::string, std::string> so_by_key = {{"x86_64", x86_so}};
  std::unique_ptr<Process> arm;
  if (with_arm) {
    std::string arm_so = build_kernels(KILN_AARCH64_CC, dir.path(), "kernels_aarch64");
    ASSERT_FALSE(arm_so.empty());
    so_by_key["aarch64"] = arm_so;
    auto argv = qemu_prefix();
    for (auto& s : server_argv(aarch64_server_binary(), tracker, "aarch64")) argv.push_back(s);
    arm = std::make_unique<Process>(argv, 60000);
    ASSERT_TRUE(arm->started()) << "the AArch64 server did not start under QEMU";
    ASSERT_TRUE(tracker.wait_for_total("aarch64", 1, 20000));
  }
  ASSERT_TRUE(tracker.wait_for_total("x86_64", 2, 10000));

  std::vector<Job> jobs;
  for (uint64_t i = 0; i < 12; ++i) jobs.push_back({(arm && i % 3 == 2) ? "aarch64" : "x86_64", 100 + i});
  auto results = run_batch(tracker, jobs, so_by_key, 3, 1);
  std::set<std::string> x86_servers;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobResult& r = results[i];
    EXPECT_EQ(r.error, RunError::kNone) << "job " << i << " (" << jobs[i].key << "): " << r.message;
    EXPECT_TRUE(r.correct) << "job " << i << " (" << jobs[i].key << ") returned wrong outputs";
    EXPECT_EQ(r.costs, 2u);
    EXPECT_TRUE(r.costs_positive) << "job " << i;
    if (jobs[i].key == "x86_64") x86_servers.insert(r.server);
  }
  EXPECT_EQ(x86_servers.size(), 2u) << "the batch should spread over both x86-64 servers";
  KeyStatus s = tracker.status("x86_64");
  EXPECT_EQ(s.total, 2u);
  EXPECT_EQ(s.free, 2u);
  EXPECT_EQ(s.pending, 0u);
  if (arm) {
    // The AArch64 server reports its own architecture (it really runs as AArch64 code).
    auto lease = TrackerClient::connect("127.0.0.1", tracker.port());
    ASSERT_TRUE(lease.ok());
    auto l = lease->request("aarch64", 0, 10000);
    ASSERT_TRUE(l.ok());
    auto sess = Session::connect(l->host, l->port);
    ASSERT_TRUE(sess.ok());
    EXPECT_EQ(sess->info().arch, "aarch64");
    // Faulting candidates are contained under QEMU as well.
    auto m = sess->upload("kernels.so", read_bytes(so_by_key["aarch64"]));
    ASSERT_TRUE(m.ok()) << m.error().message;
    RunResult segv = sess->run(unary_request(m.value(), "segv", 1));
    EXPECT_EQ(segv.error, RunError::kRuntimeDevice) << segv.message;
    RunRequest spin = unary_request(m.value(), "spin", 1);
    spin.run_timeout_ms = 500;
    EXPECT_EQ(sess->run(spin).error, RunError::kRunTimeout);
    RunResult ok = sess->run(unary_request(m.value(), "scale2", 9));
    ASSERT_EQ(ok.error, RunError::kNone) << ok.message;
    EXPECT_EQ(ok.outputs[1], expected_scale2(9));
  }
}

TEST(RpcTrackerTest, BatchAcrossTwoX86Servers) { batch_across_servers(false); }

TEST(RpcTrackerTest, BatchAcrossTwoX86AndOneAArch64Server) {
  const std::string missing = aarch64_missing();
  if (!missing.empty()) GTEST_SKIP() << "AArch64 server under QEMU: " << missing;
  batch_across_servers(true);
}

// True when some process has `pid` as its parent (scans /proc/*/stat).
bool has_child_process(pid_t pid) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    std::ifstream in(e.path() / "stat");
    std::string stat;
    if (!std::getline(in, stat)) continue;
    auto close = stat.rfind(')');  // the command name may hold spaces; fields follow the last ')'
    if (close == std::string::npos) continue;
    char state;
    int ppid = 0;
    if (sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == pid) return true;
  }
  return false;
}

TEST(RpcTrackerTest, ServerKilledMidBatch) {
  TempDir dir;
  std::string so = build_kernels(KILN_HOST_CC, dir.path(), "kernels");
  ASSERT_FALSE(so.empty());
  LocalTracker tracker;
  Process a(server_argv(host_server_binary(), tracker, "x86_64"));
  Process b(server_argv(host_server_binary(), tracker, "x86_64"));
  ASSERT_TRUE(a.started() && b.started());
  ASSERT_TRUE(tracker.wait_for_total("x86_64", 2, 10000));

  std::vector<Job> jobs;
  for (uint64_t i = 0; i < 10; ++i) jobs.push_back({"x86_64", i});
  // Kill server a while it runs a candidate (it has a child process), so a run is surely in flight.
  std::atomic<bool> killed{false};
  std::thread killer([&] {
    for (int64_t deadline = monotonic_ms() + 20000; monotonic_ms() < deadline; usleep(2000)) {
      if (has_child_process(a.pid())) {
        a.kill();
        killed = true;
        return;
      }
    }
  });
  // Each run takes >= 2 x 100 ms, so a candidate is running on a most of the time.
  auto results = run_batch(tracker, jobs, {{"x86_64", so}}, 2, 100);
  killer.join();
  ASSERT_TRUE(killed) << "server a never ran a candidate";
  int failed = 0, correct = 0;
  for (const auto& r : results) {
    if (r.error == RunError::kNone) {
      EXPECT_TRUE(r.correct);
      EXPECT_TRUE(r.costs_positive);
      ++correct;
    } else {
      EXPECT_EQ(r.error, RunError::kConnection) << r.message;
      ++failed;
    }
  }
  EXPECT_GE(failed, 1) << "the run in flight on the killed server should fail";
  EXPECT_EQ(correct + failed, 10);
  EXPECT_GE(correct, 7) << "the rest of the batch should complete on the surviving server";
  EXPECT_TRUE(tracker.wait_for_total("x86_64", 1, 5000)) << "the tracker should drop the dead server";
}

// Registers a fake device server by hand (port 1, never connected to), then falls silent (connection open).
Fd register_fake_server(uint16_t tracker_port, const std::string& key) {
  Fd fd = raw_session(tracker_port, Role::kDeviceServer);
  Writer reg;
  reg.str(key);
  reg.str("");
  reg.u16(1);
  Frame f;
  write_frame(fd.get(), MsgType::kRegister, reg.bytes(), 2000);
  EXPECT_TRUE(read_frame(fd.get(), &f, 2000, 2000).ok() && f.type == MsgType::kRegistered);
  return fd;
}

TEST(RpcTrackerTest, SilentServerIsDroppedAfterHeartbeatTimeout) {
  LocalTracker tracker(400);
  Fd fake = register_fake_server(tracker.port(), "silent");
  EXPECT_EQ(tracker.status("silent").total, 1u);
  // No heartbeats: gone within the timeout (plus slack), although its connection stays open.
  EXPECT_TRUE(tracker.wait_for_total("silent", 0, 3000));
}

TEST(RpcTrackerTest, HigherPriorityIsServedFirstAndStatusCountsPending) {
  LocalTracker tracker;
  Fd fake = register_fake_server(tracker.port(), "board");
  auto holder = TrackerClient::connect("127.0.0.1", tracker.port());
  ASSERT_TRUE(holder.ok());
  auto held = holder->request("board", 0, 2000);
  ASSERT_TRUE(held.ok()) << held.error().message;
  EXPECT_EQ(held->port, 1);

  std::mutex mu;
  std::vector<std::string> order;
  auto waiter = [&](int32_t priority, const std::string& name) {
    auto c = TrackerClient::connect("127.0.0.1", tracker.port());
    ASSERT_TRUE(c.ok());
    auto l = c->request("board", priority, 10000);
    ASSERT_TRUE(l.ok()) << l.error().message;
    {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(name);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    c->release(l.value());
  };
  std::thread low(waiter, 1, "low");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::thread high(waiter, 5, "high");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  KeyStatus s = tracker.status("board");
  EXPECT_EQ(s.total, 1u);
  EXPECT_EQ(s.free, 0u);
  EXPECT_EQ(s.pending, 2u);
  holder->release(held.value());
  low.join();
  high.join();
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(order[0], "high");
  EXPECT_EQ(order[1], "low");
  EXPECT_EQ(tracker.status("board").free, 1u);
}

TEST(RpcTrackerTest, RequestTimesOutWhenNoDeviceIsFree) {
  LocalTracker tracker;
  auto c = TrackerClient::connect("127.0.0.1", tracker.port());
  ASSERT_TRUE(c.ok());
  auto l = c->request("nothing-here", 0, 300);
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().kind, ClientError::kTimeout);
  EXPECT_EQ(tracker.status("nothing-here").pending, 1u);
  // A later status call on the same connection still works.
  auto s = c->status();
  ASSERT_TRUE(s.ok()) << s.error().message;
}

}  // namespace
}  // namespace kiln::rpc::test
