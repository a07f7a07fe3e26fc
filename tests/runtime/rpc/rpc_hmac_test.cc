// SHA-256 and HMAC-SHA256 against the FIPS 180-4 examples, the RFC 4231 test cases with full-length
// output (1, 2, 3, 4, 6, 7; case 5 truncates to 128 bits), and the `openssl` tool when it exists.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "runtime/rpc/hmac_sha256.h"
#include "tests/runtime/rpc/rpc_test_util.h"

namespace kiln::rpc::test {
namespace {

std::string hex(const Digest& d) {
  char buf[65];
  return std::string(to_hex(d, buf));
}

std::string sha_hex(const std::string& m) { return hex(sha256(m.data(), m.size())); }

std::string hmac_hex(const std::string& key, const std::string& m) { return hex(hmac_sha256(key, m.data(), m.size())); }

TEST(RpcHmac, Sha256Fips180Examples) {
  EXPECT_EQ(sha_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha_hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(sha_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(RpcHmac, IncrementalUpdatesMatchOneShot) {
  std::string m;
  for (int i = 0; i < 300; ++i) m += static_cast<char>(i * 7 + 3);
  for (size_t split : {0u, 1u, 55u, 56u, 63u, 64u, 65u, 128u, 299u}) {
    Sha256 s;
    s.update(m.data(), split);
    s.update(m.data() + split, m.size() - split);
    EXPECT_EQ(hex(s.finish()), sha_hex(m)) << "split at " << split;
  }
}

TEST(RpcHmac, Rfc4231TestCases) {
  // Case 1
  EXPECT_EQ(hmac_hex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // Case 2: a key shorter than the output
  EXPECT_EQ(hmac_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Case 3: 50 bytes of 0xdd
  EXPECT_EQ(hmac_hex(std::string(20, '\xaa'), std::string(50, '\xdd')),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  // Case 4: key 0x01..0x19, 50 bytes of 0xcd
  std::string key4;
  for (int i = 1; i <= 25; ++i) key4 += static_cast<char>(i);
  EXPECT_EQ(hmac_hex(key4, std::string(50, '\xcd')), "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  // Case 6: a key longer than the block, hashed first
  EXPECT_EQ(hmac_hex(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  // Case 7: key and data longer than the block
  EXPECT_EQ(hmac_hex(std::string(131, '\xaa'),
                     "This is a test using a larger than block-size key and a larger than block-size data. The key "
                     "needs to be hashed before being used by the HMAC algorithm."),
            "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

TEST(RpcHmac, ConstantTimeCompare) {
  uint8_t a[4] = {1, 2, 3, 4}, b[4] = {1, 2, 3, 4}, c[4] = {1, 2, 3, 5};
  EXPECT_TRUE(equal_constant_time(a, b, 4));
  EXPECT_FALSE(equal_constant_time(a, c, 4));
  EXPECT_TRUE(equal_constant_time(a, c, 3));
}

// Runs a shell command and returns the last whitespace-separated word of its output ("" on failure).
std::string last_word_of(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "";
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof buf, p)) out += buf;
  if (pclose(p) != 0) return "";
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  size_t sp = out.find_last_of(" =");
  return sp == std::string::npos ? out : out.substr(sp + 1);
}

// Our digests against `openssl dgst` for messages of every length around the padding boundaries, a
// printable key through -hmac, and binary keys (short, block-sized, longer) through -macopt hexkey.
TEST(RpcHmac, MatchesOpensslTool) {
  if (system("openssl version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no openssl binary";
  TempDir dir;
  std::mt19937 rng(2024);
  std::string file = dir.path() + "/m";
  int checked = 0;
  for (size_t len : {0u, 1u, 31u, 55u, 56u, 57u, 63u, 64u, 65u, 119u, 120u, 127u, 128u, 1000u, 4097u}) {
    std::string m(len, '\0');
    for (char& c : m) c = static_cast<char>(rng());
    std::ofstream(file, std::ios::binary) << m;
    EXPECT_EQ(last_word_of("openssl dgst -sha256 " + file), sha_hex(m)) << "sha256, length " << len;
    EXPECT_EQ(last_word_of("openssl dgst -sha256 -hmac 'printable key 123' " + file), hmac_hex("printable key 123", m))
        << "hmac -hmac, length " << len;
    for (size_t key_len : {1u, 32u, 64u, 65u, 200u}) {
      std::string key(key_len, '\0'), key_hex;
      for (char& c : key) {
        c = static_cast<char>(rng());
        char h[3];
        snprintf(h, sizeof h, "%02x", static_cast<unsigned char>(c));
        key_hex += h;
      }
      EXPECT_EQ(last_word_of("openssl dgst -sha256 -mac HMAC -macopt hexkey:" + key_hex + " " + file), hmac_hex(key, m))
          << "hmac hexkey, length " << len << ", key length " << key_len;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 75);
}

}  // namespace
}  // namespace kiln::rpc::test
