// The wire format in isolation: round trips, bounds checks on every decoder, upload-name rules and the
// deterministic input generator.
#include <gtest/gtest.h>

#include <cstring>

#include "runtime/rpc/protocol.h"

namespace kiln::rpc {
namespace {

TEST(RpcProtocol, WriterReaderRoundTrip) {
  Writer w;
  w.u8(7);
  w.u16(0xBEEF);
  w.u32(0xDEADBEEF);
  w.u64(0x0123456789ABCDEFull);
  w.i32(-5);
  w.f64(1.5);
  w.str("hello");
  w.blob("\x01\x02\x03", 3);
  Reader r(w.bytes());
  EXPECT_EQ(r.u8(), 7);
  EXPECT_EQ(r.u16(), 0xBEEF);
  EXPECT_EQ(r.u32(), 0xDEADBEEFu);
  EXPECT_EQ(r.u64(), 0x0123456789ABCDEFull);
  EXPECT_EQ(r.i32(), -5);
  EXPECT_EQ(r.f64(), 1.5);
  EXPECT_EQ(r.str(), "hello");
  auto [p, n] = r.blob(16);
  ASSERT_EQ(n, 3u);
  EXPECT_EQ(std::memcmp(p, "\x01\x02\x03", 3), 0);
  EXPECT_TRUE(r.done());
}

TEST(RpcProtocol, ReaderFailsOnTruncationAndOverlongFields) {
  Writer w;
  w.u16(3);
  Reader short_read(w.bytes());
  (void)short_read.u32();
  EXPECT_FALSE(short_read.ok());

  Writer s;
  s.str(std::string(300, 'a'));
  Reader long_str(s.bytes());
  (void)long_str.str(256);
  EXPECT_FALSE(long_str.ok());

  Writer b;
  b.u32(1000);  // claims 1000 bytes, has none
  Reader blob(b.bytes());
  (void)blob.blob(1 << 20);
  EXPECT_FALSE(blob.ok());

  Writer t;
  t.u8(1);
  t.u8(2);
  Reader trailing(t.bytes());
  (void)trailing.u8();
  EXPECT_TRUE(trailing.ok());
  EXPECT_FALSE(trailing.done());
}

RunSpec sample_spec() {
  RunSpec s;
  s.module = 3;
  s.func = "kernel";
  s.seed = 99;
  s.number = 4;
  s.repeat = 5;
  s.min_repeat_ms = 10;
  s.cache_flush = true;
  s.run_timeout_ms = 2000;
  s.threads = 4;
  s.slow_call_ms = 250;
  s.buffers = {{64, DType::kF32, true, false}, {32, DType::kI64, true, true}, {16, DType::kU8, false, true}};
  return s;
}

TEST(RpcProtocol, RunSpecRoundTrip) {
  Writer w;
  encode_run_spec(w, sample_spec());
  Reader r(w.bytes());
  RunSpec got;
  std::string why;
  bool too_large = false;
  ASSERT_TRUE(decode_run_spec(r, &got, &why, &too_large)) << why;
  EXPECT_EQ(got.func, "kernel");
  EXPECT_EQ(got.module, 3u);
  EXPECT_EQ(got.seed, 99u);
  EXPECT_TRUE(got.cache_flush);
  EXPECT_EQ(got.threads, 4);
  EXPECT_EQ(got.slow_call_ms, 250u);
  ASSERT_EQ(got.buffers.size(), 3u);
  EXPECT_EQ(got.buffers[1].dtype, DType::kI64);
  EXPECT_TRUE(got.buffers[1].input && got.buffers[1].output);
  EXPECT_FALSE(got.buffers[2].input);
}

// Decodes a spec changed by `edit`; returns the decoder's verdict.
bool decodes(void (*edit)(RunSpec&), bool* too_large) {
  RunSpec s = sample_spec();
  edit(s);
  Writer w;
  encode_run_spec(w, s);
  Reader r(w.bytes());
  RunSpec got;
  std::string why;
  return decode_run_spec(r, &got, &why, too_large);
}

TEST(RpcProtocol, RunSpecBoundsAreEnforced) {
  bool too_large = false;
  EXPECT_FALSE(decodes([](RunSpec& s) { s.buffers.resize(kMaxBuffers + 1); }, &too_large));
  EXPECT_TRUE(too_large);
  EXPECT_FALSE(decodes([](RunSpec& s) { s.buffers[0].bytes = kMaxBufferBytesTotal + 1; }, &too_large));
  EXPECT_TRUE(too_large);
  EXPECT_FALSE(decodes([](RunSpec& s) {
    s.buffers[0].bytes = kMaxBufferBytesTotal / 2 + 1;
    s.buffers[1].bytes = kMaxBufferBytesTotal / 2 + 1;
  }, &too_large));
  EXPECT_TRUE(too_large);
  EXPECT_FALSE(decodes([](RunSpec& s) { s.buffers[2].bytes = kMaxOutputBytes + 1; }, &too_large));
  EXPECT_TRUE(too_large);
  EXPECT_FALSE(decodes([](RunSpec& s) { s.repeat = 0; }, &too_large));
  EXPECT_FALSE(too_large);
  EXPECT_FALSE(decodes([](RunSpec& s) { s.repeat = kMaxRepeat + 1; }, &too_large));
  EXPECT_FALSE(decodes([](RunSpec& s) { s.number = 0; }, &too_large));
  EXPECT_FALSE(decodes([](RunSpec& s) { s.func.clear(); }, &too_large));
  EXPECT_FALSE(decodes([](RunSpec& s) { s.run_timeout_ms = 0; }, &too_large));
  EXPECT_FALSE(decodes([](RunSpec& s) { s.threads = 0; }, &too_large));
  EXPECT_FALSE(decodes([](RunSpec& s) { s.threads = kMaxRunThreads + 1; }, &too_large));

  Writer w;
  encode_run_spec(w, sample_spec());
  w.u8(0);  // trailing byte
  Reader r(w.bytes());
  RunSpec got;
  std::string why;
  EXPECT_FALSE(decode_run_spec(r, &got, &why, &too_large));

  Writer bad_dtype;
  RunSpec s = sample_spec();
  encode_run_spec(bad_dtype, s);
  bad_dtype.bytes()[bad_dtype.bytes().size() - 2] = 42;  // last buffer's dtype
  Reader rd(bad_dtype.bytes());
  EXPECT_FALSE(decode_run_spec(rd, &got, &why, &too_large));
  EXPECT_NE(why.find("dtype"), std::string::npos) << why;
}

TEST(RpcProtocol, RunOutcomeRoundTripAndBounds) {
  RunOutcome o;
  o.status = RunStatus::kRunTimeout;
  o.message = "killed";
  o.costs = {1e-3, 2e-3};
  o.outputs = {{1, {1, 2, 3}}, {4, {}}};
  Writer w;
  encode_run_outcome(w, o);
  Reader r(w.bytes());
  RunOutcome got;
  ASSERT_TRUE(decode_run_outcome(r, &got));
  EXPECT_EQ(got.status, RunStatus::kRunTimeout);
  EXPECT_EQ(got.message, "killed");
  EXPECT_EQ(got.costs, o.costs);
  EXPECT_EQ(got.outputs, o.outputs);

  Writer bad;
  bad.u8(9);  // no such status
  Reader rb(bad.bytes());
  EXPECT_FALSE(decode_run_outcome(rb, &got));
}

TEST(RpcProtocol, StatusRoundTrip) {
  std::vector<KeyStatus> s = {{"rk3588", 3, 1, 2}, {"x86_64", 1, 1, 0}};
  Writer w;
  encode_status(w, s);
  Reader r(w.bytes());
  std::vector<KeyStatus> got;
  ASSERT_TRUE(decode_status(r, &got));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].key, "rk3588");
  EXPECT_EQ(got[0].pending, 2u);
}

TEST(RpcProtocol, UploadNamesArePlainFileNames) {
  EXPECT_TRUE(is_valid_upload_name("matmul_0.so"));
  EXPECT_TRUE(is_valid_upload_name("cand-12.so"));
  EXPECT_FALSE(is_valid_upload_name(""));
  EXPECT_FALSE(is_valid_upload_name("../x"));
  EXPECT_FALSE(is_valid_upload_name(".."));
  EXPECT_FALSE(is_valid_upload_name("a/b.so"));
  EXPECT_FALSE(is_valid_upload_name("/etc/passwd"));
  EXPECT_FALSE(is_valid_upload_name(".hidden"));
  EXPECT_FALSE(is_valid_upload_name("x..so"));
  EXPECT_FALSE(is_valid_upload_name("a b"));
  EXPECT_FALSE(is_valid_upload_name(std::string(129, 'a')));
}

TEST(RpcProtocol, RandomFillIsDeterministicAndInRange) {
  std::vector<float> a(257), b(257), c(257);
  fill_random(a.data(), a.size() * 4, DType::kF32, 5, 0);
  fill_random(b.data(), b.size() * 4, DType::kF32, 5, 0);
  fill_random(c.data(), c.size() * 4, DType::kF32, 5, 1);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);  // another buffer index gets other data
  for (float v : a) {
    EXPECT_GE(v, -1.0f);
    EXPECT_LE(v, 1.0f);
  }
  std::vector<int64_t> ints(100);
  fill_random(ints.data(), ints.size() * 8, DType::kI64, 1, 0);
  for (int64_t v : ints) {
    EXPECT_GE(v, 0);
    EXPECT_LE(v, 2);
  }
  std::vector<uint8_t> bools(100);
  fill_random(bools.data(), bools.size(), DType::kBool, 1, 0);
  for (uint8_t v : bools) EXPECT_LE(v, 1);
  // A size that is not a multiple of the element width leaves a zeroed tail.
  uint8_t odd[7];
  std::memset(odd, 0xFF, sizeof odd);
  fill_random(odd, sizeof odd, DType::kF32, 1, 0);
  EXPECT_EQ(odd[4] | odd[5] | odd[6], 0);
}

}  // namespace
}  // namespace kiln::rpc
