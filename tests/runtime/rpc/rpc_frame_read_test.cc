// read_frame over a socketpair: bodies are read in bounded chunks, so memory follows the bytes that
// arrived and never the length a peer announced; frames over the caller's limit are refused at the
// header. (The same bounds against a real server are in rpc_security_test.cc.)
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <thread>
#include <vector>

#include "runtime/rpc/net.h"
#include "runtime/rpc/protocol.h"

namespace kiln::rpc {
namespace {

struct SocketPair {
  SocketPair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    a = Fd(fds[0]);
    b = Fd(fds[1]);
  }
  Fd a, b;
};

// A frame header: u32 length (type byte included), then the type.
std::vector<uint8_t> header(uint32_t len, MsgType type) {
  return {static_cast<uint8_t>(len), static_cast<uint8_t>(len >> 8), static_cast<uint8_t>(len >> 16),
          static_cast<uint8_t>(len >> 24), static_cast<uint8_t>(type)};
}

TEST(RpcFrameRead, LargeBodyArrivesWholeAcrossManyChunks) {
  SocketPair p;
  std::vector<uint8_t> body(3 * kFrameChunkBytes + 12345);
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<uint8_t>(i * 131 + 7);
  std::thread writer([&] { EXPECT_TRUE(write_frame(p.a.get(), MsgType::kUpload, body, 10000).ok()); });
  Frame f;
  IoStatus st = read_frame(p.b.get(), &f, 10000, 10000);
  writer.join();
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_EQ(f.type, MsgType::kUpload);
  EXPECT_EQ(f.body, body);
}

TEST(RpcFrameRead, AnnouncedSizeIsNotAllocatedBeforeItArrives) {
  SocketPair p;
  std::vector<uint8_t> head = header(kMaxFrameBytes, MsgType::kUpload);  // ~80 MiB announced
  ASSERT_EQ(write_full(p.a.get(), head.data(), head.size(), 1000), IoResult::kOk);
  ASSERT_EQ(write_full(p.a.get(), "0123456789", 10, 1000), IoResult::kOk);
  p.a.reset();  // the peer goes away after 10 body bytes
  Frame f;
  IoStatus st = read_frame(p.b.get(), &f, 2000, 2000);
  EXPECT_EQ(st.kind, IoStatus::kProtocol) << st.message;  // truncated
  EXPECT_EQ(f.body.size(), 10u);
  // One 64 KiB step past what arrived, at most: nothing near the 80 MiB announced.
  EXPECT_LE(f.body.capacity(), (size_t{64} << 10) + f.body.size()) << "the buffer grew towards the announced length";
}

TEST(RpcFrameRead, StalledBodyTimesOutWithoutGrowing) {
  SocketPair p;
  std::vector<uint8_t> head = header(kMaxFrameBytes, MsgType::kUpload);
  ASSERT_EQ(write_full(p.a.get(), head.data(), head.size(), 1000), IoResult::kOk);
  Frame f;
  IoStatus st = read_frame(p.b.get(), &f, 2000, 200);  // the peer says nothing more
  EXPECT_EQ(st.kind, IoStatus::kProtocol) << st.message;
  EXPECT_LE(f.body.capacity(), size_t{64} << 10);
}

TEST(RpcFrameRead, PreAuthLimitRefusesTheHeaderBeforeAnyBody) {
  SocketPair p;
  std::vector<uint8_t> head = header(kMaxPreAuthFrameBytes + 1, MsgType::kHello);
  ASSERT_EQ(write_full(p.a.get(), head.data(), head.size(), 1000), IoResult::kOk);
  Frame f;
  IoStatus st = read_frame(p.b.get(), &f, 2000, 2000, kMaxPreAuthFrameBytes);
  EXPECT_EQ(st.kind, IoStatus::kTooLarge) << st.message;
  EXPECT_EQ(f.body.capacity(), 0u);
  // Exactly at the limit is still a frame (on a fresh pair: the refused frame's bytes are unread).
  SocketPair q;
  std::vector<uint8_t> body(kMaxPreAuthFrameBytes - 1, 'x');
  ASSERT_TRUE(write_frame(q.a.get(), MsgType::kHello, body, 1000).ok());
  Frame g;
  ASSERT_TRUE(read_frame(q.b.get(), &g, 2000, 2000, kMaxPreAuthFrameBytes).ok());
  EXPECT_EQ(g.body.size(), body.size());
}

}  // namespace
}  // namespace kiln::rpc
