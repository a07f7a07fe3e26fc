// The device server against good and bad candidates and good and bad clients. One server process is
// shared by the suite; every fault test ends by checking that the server still serves a good session.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "runtime/rpc/net.h"
#include "runtime/rpc/rpc_client.h"
#include "tests/runtime/rpc/rpc_test_util.h"

namespace kiln::rpc::test {
namespace {

constexpr int kSessionTimeoutMs = 1500;

class RpcServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    work_ = dir_->path() + "/work";
    std::filesystem::create_directories(work_);
    so_ = build_kernels(KILN_HOST_CC, dir_->path(), "kernels");
    server_ = new Process({host_server_binary(), "--host", "127.0.0.1", "--work-dir", work_, "--session-timeout",
                           std::to_string(kSessionTimeoutMs)});
  }
  static void TearDownTestSuite() {
    delete server_;
    delete dir_;
  }
  void SetUp() override {
    ASSERT_FALSE(so_.empty()) << "could not compile the test kernels";
    ASSERT_TRUE(server_->started()) << "kiln-rpc-server did not start";
  }
  static uint16_t port() { return server_->port(); }

  // A session with the kernels uploaded; module id in *module.
  static Session connect_with_kernels(uint32_t* module) {
    auto s = Session::connect("127.0.0.1", port());
    EXPECT_TRUE(s.ok()) << s.error().message;
    auto m = s->upload("kernels.so", read_bytes(so_));
    EXPECT_TRUE(m.ok()) << m.error().message;
    *module = m.ok() ? m.value() : 0;
    return std::move(s.value());
  }

  static TempDir* dir_;
  static std::string work_, so_;
  static Process* server_;
};
TempDir* RpcServerTest::dir_ = nullptr;
std::string RpcServerTest::work_, RpcServerTest::so_;
Process* RpcServerTest::server_ = nullptr;

// Opens a raw connection; the fault tests speak the protocol (or not) by hand.
Fd raw_connect(uint16_t port) {
  std::string error;
  Fd fd = connect_tcp("127.0.0.1", port, 5000, &error);
  EXPECT_TRUE(fd.valid()) << error;
  return fd;
}

// Reads the ERROR frame the server sends before closing; returns its code.
ErrorCode read_error(int fd) {
  Frame f;
  IoStatus io = read_frame(fd, &f, 10000, 10000);
  EXPECT_TRUE(io.ok()) << io.message;
  EXPECT_EQ(f.type, MsgType::kError);
  Reader r(f.body);
  return static_cast<ErrorCode>(r.u8());
}

TEST_F(RpcServerTest, RunsACorrectKernel) {
  uint32_t m;
  Session s = connect_with_kernels(&m);
  EXPECT_EQ(s.info().arch, "x86_64");
  RunRequest req = unary_request(m, "scale2", 7);
  req.cache_flush = true;
  RunResult r = s.run(req);
  ASSERT_EQ(r.error, RunError::kNone) << r.message;
  ASSERT_EQ(r.outputs.size(), 2u);
  EXPECT_TRUE(r.outputs[0].empty());  // an input only: not sent back
  EXPECT_EQ(r.outputs[1], expected_scale2(7));
  ASSERT_EQ(r.costs.size(), 3u);
  for (double c : r.costs) EXPECT_GT(c, 0.0);
}

TEST_F(RpcServerTest, NumberGrowsUntilMinRepeatMs) {
  uint32_t m;
  Session s = connect_with_kernels(&m);
  RunRequest req = unary_request(m, "scale2", 1);
  req.repeat = 2;
  req.min_repeat_ms = 30;
  auto t0 = std::chrono::steady_clock::now();
  RunResult r = s.run(req);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.error, RunError::kNone) << r.message;
  EXPECT_GE(seconds, 0.06);  // two repeats of at least 30 ms each
  // Each cost is per call: a 1024-element loop takes far less than a repeat.
  for (double c : r.costs) EXPECT_LT(c, 0.01);
}

// slow_call_ms: a first call slower than the cutoff is the only cost; without a cutoff, every repeat.
TEST_F(RpcServerTest, SlowFirstCallIsTheOnlyCostPastTheCutoff) {
  uint32_t m;
  Session s = connect_with_kernels(&m);
  RunRequest req = unary_request(m, "slow20ms", 1);
  req.slow_call_ms = 5;
  RunResult r = s.run(req);
  ASSERT_EQ(r.error, RunError::kNone) << r.message;
  ASSERT_EQ(r.costs.size(), 1u);
  EXPECT_GE(r.costs[0], 0.02);
  req.slow_call_ms = 0;
  r = s.run(req);
  ASSERT_EQ(r.error, RunError::kNone) << r.message;
  EXPECT_EQ(r.costs.size(), 3u);
}

// threads > 1: the kernel gets a parallel_for hook backed by a pthread pool, and its work is right.
TEST_F(RpcServerTest, ThreadsGiveTheKernelAParallelHook) {
  uint32_t m;
  Session s = connect_with_kernels(&m);
  RunRequest req = unary_request(m, "scale2_parallel", 7);
  RunResult serial = s.run(req);
  ASSERT_EQ(serial.error, RunError::kNone) << serial.message;
  req.threads = 2;
  RunResult pooled = s.run(req);
  ASSERT_EQ(pooled.error, RunError::kNone) << pooled.message;
  std::vector<uint8_t> want = expected_scale2(7);
  float flag = 0;
  std::memcpy(&flag, pooled.outputs[1].data(), 4);
  EXPECT_EQ(flag, 1.0f);
  std::memcpy(&flag, serial.outputs[1].data(), 4);
  EXPECT_EQ(flag, 0.0f);
  // Apart from the flag in element 0, both computed 2x.
  EXPECT_TRUE(std::equal(want.begin() + 4, want.end(), pooled.outputs[1].begin() + 4));
  EXPECT_TRUE(std::equal(want.begin() + 4, want.end(), serial.outputs[1].begin() + 4));
}

TEST_F(RpcServerTest, SegfaultIsRuntimeDeviceAndTheSessionGoesOn) {
  uint32_t m;
  Session s = connect_with_kernels(&m);
  RunResult r = s.run(unary_request(m, "segv", 1));
  EXPECT_EQ(r.error, RunError::kRuntimeDevice);
  EXPECT_NE(r.message.find("SIGSEGV"), std::string::npos) << r.message;
  RunResult ok = s.run(unary_request(m, "scale2", 3));
  ASSERT_EQ(ok.error, RunError::kNone) << ok.message;
  EXPECT_EQ(ok.outputs[1], expected_scale2(3));
}

TEST_F(RpcServerTest, InfiniteLoopIsRunTimeout) {
  uint32_t m;
  Session s = connect_with_kernels(&m);
  RunRequest req = unary_request(m, "spin", 1);
  req.run_timeout_ms = 300;
  auto t0 = std::chrono::steady_clock::now();
  RunResult r = s.run(req);
  EXPECT_EQ(r.error, RunError::kRunTimeout) << r.message;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  RunResult ok = s.run(unary_request(m, "scale2", 3));
  EXPECT_EQ(ok.error, RunError::kNone) << ok.message;
  expect_good_session(port(), so_);
}

TEST_F(RpcServerTest, WrongResultsComeBackAsBytes) {
  uint32_t m;
  Session s = connect_with_kernels(&m);
  RunResult r = s.run(unary_request(m, "garbage", 5));
  ASSERT_EQ(r.error, RunError::kNone) << r.message;  // the server does not judge outputs
  ASSERT_EQ(r.outputs[1].size(), kElements * 4u);
  EXPECT_NE(r.outputs[1], expected_scale2(5));      // the client side does
}

TEST_F(RpcServerTest, MissingSymbolAndBadModuleAreRuntimeDevice) {
  uint32_t m;
  Session s = connect_with_kernels(&m);
  RunResult r = s.run(unary_request(m, "no_such_kernel", 1));
  EXPECT_EQ(r.error, RunError::kRuntimeDevice);
  EXPECT_NE(r.message.find("dlsym"), std::string::npos) << r.message;
  auto junk = s.upload("junk.so", std::vector<uint8_t>(100, 0x5A));
  ASSERT_TRUE(junk.ok());
  r = s.run(unary_request(junk.value(), "scale2", 1));
  EXPECT_EQ(r.error, RunError::kRuntimeDevice);
  EXPECT_NE(r.message.find("dlopen"), std::string::npos) << r.message;
}

TEST_F(RpcServerTest, UnknownModuleIsRejected) {
  uint32_t m;
  Session s = connect_with_kernels(&m);
  RunResult r = s.run(unary_request(m + 100, "scale2", 1));
  EXPECT_EQ(r.error, RunError::kRejected);
  EXPECT_NE(r.message.find("no-module"), std::string::npos) << r.message;
  expect_good_session(port(), so_);
}

// Waits up to a second for every session's upload dir to be removed (they go at session end).
bool work_dir_empties(const std::string& dir) {
  for (int i = 0; i < 50; ++i) {
    if (std::filesystem::is_empty(dir)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

TEST_F(RpcServerTest, UploadsLiveInAPrivateDirUnderServerChosenNames) {
  ASSERT_TRUE(work_dir_empties(work_)) << "earlier sessions left upload dirs in " << work_;
  {
    uint32_t m;
    Session s = connect_with_kernels(&m);
    std::vector<std::filesystem::path> dirs;
    for (const auto& e : std::filesystem::directory_iterator(work_)) dirs.push_back(e.path());
    ASSERT_EQ(dirs.size(), 1u);
    struct stat st;
    ASSERT_EQ(stat(dirs[0].c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    EXPECT_TRUE(std::filesystem::exists(dirs[0] / ("m" + std::to_string(m) + ".so")));
    EXPECT_FALSE(std::filesystem::exists(dirs[0] / "kernels.so"));
  }
  EXPECT_TRUE(work_dir_empties(work_)) << "the session ended (BYE) but its upload dir stayed";
}

TEST_F(RpcServerTest, UploadNameWithDotDotIsRejected) {
  auto s = Session::connect("127.0.0.1", port());
  ASSERT_TRUE(s.ok());
  auto m = s->upload("../x", read_bytes(so_));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().kind, ClientError::kRejected);
  EXPECT_EQ(m.error().server_code, ErrorCode::kBadName);
  EXPECT_FALSE(std::filesystem::exists(work_ + "/x"));
  expect_good_session(port(), so_);
}

TEST_F(RpcServerTest, GarbageBytesAreRejected) {
  Fd fd = raw_connect(port());
  std::vector<uint8_t> junk(64);
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<uint8_t>(i * 37 + 11);
  write_full(fd.get(), junk.data(), junk.size(), 2000);
  uint8_t magic[4];
  uint16_t version, status;
  ASSERT_TRUE(read_preamble(fd.get(), magic, &version, &status, 5000).ok());
  EXPECT_EQ(status, static_cast<uint16_t>(HandshakeStatus::kBadMagic));
  expect_good_session(port(), so_);
}

TEST_F(RpcServerTest, WrongMagicAndWrongVersionAreRejected) {
  {
    Fd fd = raw_connect(port());
    const char http[] = "GET / HTTP/1.1\r\n\r\n";
    write_full(fd.get(), http, sizeof http - 1, 2000);
    uint8_t magic[4];
    uint16_t version, status;
    ASSERT_TRUE(read_preamble(fd.get(), magic, &version, &status, 5000).ok());
    EXPECT_EQ(status, static_cast<uint16_t>(HandshakeStatus::kBadMagic));
  }
  {
    Fd fd = raw_connect(port());
    uint8_t pre[8] = {'K', 'R', 'P', 'C', 99, 0, 1, 0};  // version 99
    write_full(fd.get(), pre, sizeof pre, 2000);
    uint8_t magic[4];
    uint16_t version, status;
    ASSERT_TRUE(read_preamble(fd.get(), magic, &version, &status, 5000).ok());
    EXPECT_EQ(status, static_cast<uint16_t>(HandshakeStatus::kBadVersion));
  }
  expect_good_session(port(), so_);
}

TEST_F(RpcServerTest, OversizedFrameIsRejected) {
  Fd fd = raw_session(port());
  uint8_t head[5] = {0xF0, 0xFF, 0xFF, 0xFF, static_cast<uint8_t>(MsgType::kUpload)};
  write_full(fd.get(), head, sizeof head, 2000);
  EXPECT_EQ(read_error(fd.get()), ErrorCode::kTooLarge);
  expect_good_session(port(), so_);
}

TEST_F(RpcServerTest, TruncatedFrameIsRejected) {
  Fd fd = raw_session(port());
  uint8_t head[5] = {100, 0, 0, 0, static_cast<uint8_t>(MsgType::kRun)};
  write_full(fd.get(), head, sizeof head, 2000);
  write_full(fd.get(), "0123456789", 10, 2000);
  shutdown(fd.get(), SHUT_WR);  // 89 bytes short, and no more coming
  EXPECT_EQ(read_error(fd.get()), ErrorCode::kProtocol);
  expect_good_session(port(), so_);
}

TEST_F(RpcServerTest, MalformedMessagesAreRejected) {
  {
    Fd fd = raw_session(port());
    ASSERT_TRUE(write_frame(fd.get(), MsgType::kRun, {1, 2, 3}, 2000).ok());  // a RUN cut short
    EXPECT_EQ(read_error(fd.get()), ErrorCode::kProtocol);
  }
  {
    Fd fd = raw_session(port());
    ASSERT_TRUE(write_frame(fd.get(), static_cast<MsgType>(200), {}, 2000).ok());  // no such message
    EXPECT_EQ(read_error(fd.get()), ErrorCode::kProtocol);
  }
  {
    Fd fd = raw_session(port());
    RunSpec spec = unary_request(1, "scale2", 1);
    spec.buffers.resize(kMaxBuffers + 1, spec.buffers[0]);
    Writer w;
    encode_run_spec(w, spec);
    ASSERT_TRUE(write_frame(fd.get(), MsgType::kRun, w.bytes(), 2000).ok());
    EXPECT_EQ(read_error(fd.get()), ErrorCode::kTooLarge);
  }
  expect_good_session(port(), so_);
}

TEST_F(RpcServerTest, IdleSessionTimesOutDistinctlyFromRuns) {
  uint32_t m;
  Session s = connect_with_kernels(&m);
  std::this_thread::sleep_for(std::chrono::milliseconds(kSessionTimeoutMs + 700));
  RunResult r = s.run(unary_request(m, "scale2", 1));
  EXPECT_EQ(r.error, RunError::kSessionTimeout) << run_error_name(r.error) << ": " << r.message;
  expect_good_session(port(), so_);
}

TEST_F(RpcServerTest, HundredConcurrentSessionsFinishInBound) {
  constexpr int kSessions = 100;
  std::vector<uint8_t> bytes = read_bytes(so_);
  std::atomic<int> good{0};
  std::vector<std::string> failures(kSessions);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < kSessions; ++i) {
    threads.emplace_back([&, i] {
      ConnectOptions opts;
      opts.connect_timeout_ms = 30000;
      auto s = Session::connect("127.0.0.1", port(), opts);
      if (!s.ok()) return void(failures[i] = "connect: " + s.error().message);
      auto m = s->upload("k" + std::to_string(i) + ".so", bytes);
      if (!m.ok()) return void(failures[i] = "upload: " + m.error().message);
      RunRequest req = unary_request(m.value(), "scale2", static_cast<uint64_t>(i));
      req.repeat = 1;
      RunResult r = s->run(req);
      if (r.error != RunError::kNone) return void(failures[i] = std::string("run: ") + r.message);
      if (r.outputs[1] != expected_scale2(static_cast<uint64_t>(i))) return void(failures[i] = "wrong output");
      ++good;
    });
  }
  for (auto& t : threads) t.join();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int i = 0; i < kSessions; ++i) EXPECT_TRUE(failures[i].empty()) << "session " << i << ": " << failures[i];
  EXPECT_EQ(good, kSessions);
  EXPECT_LT(seconds, 60.0);
  printf("%d concurrent sessions in %.2f s\n", kSessions, seconds);
}

}  // namespace
}  // namespace kiln::rpc::test
