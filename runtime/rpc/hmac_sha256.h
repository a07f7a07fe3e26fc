/// \file SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), written for the RPC handshake.
///
/// The RPC runtime links nothing but libc, libdl and pthreads and is cross-compiled statically for
/// boards whose toolchains have no OpenSSL, so it carries its own small digest instead. It is only
/// used to prove knowledge of the shared auth key over a fresh nonce; tests check it against the
/// FIPS 180-4 examples and RFC 4231 vectors and against the `openssl` tool.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kiln::rpc {

/// A SHA-256 or HMAC-SHA256 result.
using Digest = std::array<uint8_t, 32>;

/// Incremental SHA-256: update() any number of times, then finish() once.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  Digest finish();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

/// SHA-256 of one message.
Digest sha256(const void* data, size_t n);

/// Incremental HMAC-SHA256 with a key of any length (keys longer than 64 bytes are hashed first).
class HmacSha256 {
 public:
  HmacSha256(const void* key, size_t key_len);
  explicit HmacSha256(std::string_view key) : HmacSha256(key.data(), key.size()) {}
  void update(const void* data, size_t n) { inner_.update(data, n); }
  void update(std::string_view s) { inner_.update(s); }
  Digest finish();

 private:
  Sha256 inner_;
  uint8_t opad_key_[64];
};

/// HMAC-SHA256 of one message.
Digest hmac_sha256(std::string_view key, const void* data, size_t n);

/// True when a and b are equal, in time that does not depend on where they differ.
bool equal_constant_time(const uint8_t* a, const uint8_t* b, size_t n);

/// Lowercase hex of a digest (for tests and logs).
std::string_view to_hex(const Digest& d, char (&out)[65]);

}  // namespace kiln::rpc
