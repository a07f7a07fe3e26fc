// Each way a connection can fail the handshake or be turned away, on the device server and on the
// tracker: every one ends in a typed ERROR frame (never a bare reset), and the listener keeps serving.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "runtime/rpc/handshake.h"
#include "runtime/rpc/net.h"
#include "runtime/rpc/rpc_client.h"
#include "runtime/rpc/tracker.h"
#include "tests/runtime/rpc/rpc_test_util.h"

namespace kiln::rpc::test {
namespace {

const std::string kKey = "handshake test key, 32 bytes ok";

// Connects and gets through the preamble and the CHALLENGE, so the caller can send its own HELLO.
Fd up_to_challenge(uint16_t port, Role role = Role::kClient) {
  std::string error;
  Fd fd = connect_tcp("127.0.0.1", port, 5000, &error);
  EXPECT_TRUE(fd.valid()) << error;
  EXPECT_TRUE(write_preamble(fd.get(), static_cast<uint16_t>(role), 2000).ok());
  uint8_t magic[4];
  uint16_t version = 0, status = 1;
  EXPECT_TRUE(read_preamble(fd.get(), magic, &version, &status, 5000).ok());
  EXPECT_EQ(status, 0);
  Frame f;
  EXPECT_TRUE(read_frame(fd.get(), &f, 5000, 5000).ok());
  EXPECT_EQ(f.type, MsgType::kChallenge);
  return fd;
}

// The code of the ERROR frame the peer sends next (kInternal when something else comes).
ErrorCode next_error(int fd) {
  Frame f;
  IoStatus io = read_frame(fd, &f, 5000, 5000);
  if (!io.ok() || f.type != MsgType::kError) {
    ADD_FAILURE() << "expected an ERROR frame, got " << (io.ok() ? "type " + std::to_string(int(f.type)) : io.message);
    return ErrorCode::kInternal;
  }
  Reader r(f.body);
  return static_cast<ErrorCode>(r.u8());
}

class RpcHandshakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    so_ = build_kernels(KILN_HOST_CC, dir_.path(), "kernels");
    ASSERT_FALSE(so_.empty());
  }
  TempDir dir_;
  std::string so_;
};

TEST_F(RpcHandshakeTest, AnythingButHelloFirstIsAProtocolError) {
  Process server({host_server_binary(), "--work-dir", dir_.path()});
  ASSERT_TRUE(server.started());
  Fd fd = up_to_challenge(server.port());
  ASSERT_TRUE(write_frame(fd.get(), MsgType::kBye, {}, 2000).ok());
  EXPECT_EQ(next_error(fd.get()), ErrorCode::kProtocol);
  expect_good_session(server.port(), so_);
}

TEST_F(RpcHandshakeTest, MalformedHelloIsAProtocolError) {
  Process server({host_server_binary(), "--work-dir", dir_.path()});
  ASSERT_TRUE(server.started());
  Fd fd = up_to_challenge(server.port());
  Writer hello;
  hello.str("no nonce, no proof");
  ASSERT_TRUE(write_frame(fd.get(), MsgType::kHello, hello.bytes(), 2000).ok());
  EXPECT_EQ(next_error(fd.get()), ErrorCode::kProtocol);
  expect_good_session(server.port(), so_);
}

TEST_F(RpcHandshakeTest, RoleNotServedHereIsRefusedInThePreamble) {
  Process server({host_server_binary(), "--work-dir", dir_.path()});
  ASSERT_TRUE(server.started());
  ConnectOptions opts;
  auto t = TrackerClient::connect("127.0.0.1", server.port(), opts);  // a tuner's role, at a device server
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().kind, ClientError::kHandshake) << t.error().message;
  expect_good_session(server.port(), so_);
}

TEST_F(RpcHandshakeTest, ClientWithAKeyIsRefusedByAServerWithout) {
  // Keys must match both ways: a keyless (loopback) server is not a place for a keyed client's work.
  Process server({host_server_binary(), "--work-dir", dir_.path()});
  ASSERT_TRUE(server.started());
  ConnectOptions opts;
  opts.auth_key = kKey;
  auto s = Session::connect("127.0.0.1", server.port(), opts);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ClientError::kRejected) << s.error().message;
  EXPECT_EQ(s.error().server_code, ErrorCode::kAuth);
  EXPECT_NE(s.error().message.find("auth keys differ"), std::string::npos) << s.error().message;
}

TEST_F(RpcHandshakeTest, ClientRefusesAPeerThatSkipsTheChallenge) {
  std::string error;
  uint16_t port = 0;
  Fd listener = listen_tcp("127.0.0.1", 0, &port, &error);
  ASSERT_TRUE(listener.valid()) << error;
  std::thread peer([&] {
    if (wait_readable(listener.get(), 10000) <= 0) return;
    Fd c(accept(listener.get(), nullptr, nullptr));
    uint8_t magic[4];
    uint16_t version, role;
    if (!read_preamble(c.get(), magic, &version, &role, 5000).ok()) return;
    write_preamble(c.get(), 0, 2000);
    Writer welcome;  // straight to WELCOME, as a version-2 server would
    encode_server_info(welcome, ServerInfo{"x86_64", "", 60000, kMaxUploadBytes, 600000});
    write_frame(c.get(), MsgType::kWelcome, welcome.bytes(), 2000);
    wait_readable(c.get(), 2000);
  });
  auto s = Session::connect("127.0.0.1", port);
  peer.join();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ClientError::kProtocol) << s.error().message;
}

TEST_F(RpcHandshakeTest, SessionsOverMaxSessionsAreBusy) {
  Process server({host_server_binary(), "--work-dir", dir_.path(), "--max-sessions", "1"});
  ASSERT_TRUE(server.started());
  {
    auto first = Session::connect("127.0.0.1", server.port());
    ASSERT_TRUE(first.ok()) << first.error().message;
    auto second = Session::connect("127.0.0.1", server.port());
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.error().server_code, ErrorCode::kBusy) << second.error().message;
  }
  // The first session's BYE frees its slot (the server notices within a moment). The session that
  // gets the slot is the one checked: a new one right after it could find the slot not yet freed.
  for (int i = 0; i < 50; ++i) {
    auto again = Session::connect("127.0.0.1", server.port());
    if (again.ok()) {
      expect_good_session(again.value(), so_);
      return;
    }
    EXPECT_EQ(again.error().server_code, ErrorCode::kBusy);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  FAIL() << "the first session's slot was never freed";
}

TEST_F(RpcHandshakeTest, TrackerConnectionsOverTheLimitAreBusy) {
  TrackerOptions o;
  o.max_connections = 2;
  TrackerThread tracker(o);
  auto a = TrackerClient::connect("127.0.0.1", tracker.port());
  auto b = TrackerClient::connect("127.0.0.1", tracker.port());
  ASSERT_TRUE(a.ok() && b.ok());
  auto c = TrackerClient::connect("127.0.0.1", tracker.port());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().server_code, ErrorCode::kBusy) << c.error().message;
  EXPECT_TRUE(a->status().ok()) << "the connections already in were disturbed";
}

// Malformed tracker messages get an ERROR frame the client can read, not a connection reset.
TEST_F(RpcHandshakeTest, TrackerAnswersMalformedMessagesWithAnError) {
  TrackerThread tracker;
  {
    Fd fd = raw_session(tracker.port(), Role::kDeviceServer);
    Writer reg;
    reg.str("board");
    reg.str("");
    reg.u16(0);  // port 0: no server listens there
    ASSERT_TRUE(write_frame(fd.get(), MsgType::kRegister, reg.bytes(), 2000).ok());
    EXPECT_EQ(next_error(fd.get()), ErrorCode::kProtocol);
  }
  {
    Fd fd = raw_session(tracker.port(), Role::kDeviceServer);
    std::vector<uint8_t> big(8192, 'x');  // over the tracker's 4 KiB frames
    ASSERT_TRUE(write_frame(fd.get(), MsgType::kRegister, big, 2000).ok());
    EXPECT_EQ(next_error(fd.get()), ErrorCode::kTooLarge);
  }
  {
    Fd fd = raw_session(tracker.port(), Role::kTrackerClient);
    ASSERT_TRUE(write_frame(fd.get(), MsgType::kRequest, {1, 2, 3}, 2000).ok());  // a REQUEST cut short
    EXPECT_EQ(next_error(fd.get()), ErrorCode::kProtocol);
  }
  {
    Fd fd = raw_session(tracker.port(), Role::kTrackerClient);
    ASSERT_TRUE(write_frame(fd.get(), MsgType::kRelease, {1}, 2000).ok());
    EXPECT_EQ(next_error(fd.get()), ErrorCode::kProtocol);
  }
  {
    Fd fd = raw_session(tracker.port(), Role::kTrackerClient);
    ASSERT_TRUE(write_frame(fd.get(), MsgType::kUpload, {}, 2000).ok());  // not a tracker message
    EXPECT_EQ(next_error(fd.get()), ErrorCode::kProtocol);
  }
  auto t = TrackerClient::connect("127.0.0.1", tracker.port());
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->status().ok());
}

}  // namespace
}  // namespace kiln::rpc::test
