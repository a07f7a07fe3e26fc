// The accepting side of the handshake and the proofs both sides compute. The connecting side lives
// in rpc_client.cc (connect_authenticated), next to the errors it reports.
#include "runtime/rpc/handshake.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>

#include "runtime/rpc/net.h"

namespace kiln::rpc {

namespace {

int left_ms(int64_t deadline) { return static_cast<int>(std::max<int64_t>(0, deadline - monotonic_ms())); }

}  // namespace

bool random_bytes(void* out, size_t n) {
  auto* p = static_cast<uint8_t*>(out);
  size_t done = 0;
  while (done < n) {
    ssize_t got = getrandom(p + done, n - done, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    done += static_cast<size_t>(got);
  }
  if (done == n) return true;
  Fd fd(open("/dev/urandom", O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  return read_full(fd.get(), p + done, n - done, 2000) == IoResult::kOk;
}

Digest handshake_proof(std::string_view key, const Nonce& server_nonce, const Nonce& client_nonce, Role role,
                       std::string_view context) {
  HmacSha256 h(key);
  h.update(server_nonce.data(), server_nonce.size());
  h.update(client_nonce.data(), client_nonce.size());
  uint16_t r = static_cast<uint16_t>(role);
  uint8_t role_le[2] = {static_cast<uint8_t>(r), static_cast<uint8_t>(r >> 8)};
  h.update(role_le, sizeof role_le);
  h.update(context);
  return h.finish();
}

bool accept_handshake(int fd, const AcceptConfig& cfg, AcceptedPeer* peer, std::string* why) {
  auto refuse = [&](HandshakeStatus status, std::string message) {
    *why = std::move(message);
    (void)write_preamble(fd, static_cast<uint16_t>(status), std::min(2000, left_ms(cfg.deadline_ms)));
    drain_before_close(fd);
    return false;
  };
  auto reject = [&](ErrorCode code, std::string message) {
    *why = std::move(message);
    send_error(fd, code, code == ErrorCode::kAuth ? "authentication failed" : *why, std::min(2000, left_ms(cfg.deadline_ms)));
    drain_before_close(fd);
    return false;
  };
  uint8_t magic[4];
  uint16_t version = 0, role = 0;
  IoStatus io = read_preamble(fd, magic, &version, &role, left_ms(cfg.deadline_ms));
  if (!io.ok()) return *why = "no preamble: " + io.message, false;
  if (memcmp(magic, kMagic, 4) != 0) return refuse(HandshakeStatus::kBadMagic, "bad magic");
  if (version != kProtocolVersion) return refuse(HandshakeStatus::kBadVersion, "protocol version " + std::to_string(version));
  if (role >= 32 || !(cfg.allowed_roles & (1u << role)))
    return refuse(HandshakeStatus::kBadRole, "role " + std::to_string(role) + " not served here");
  if (!write_preamble(fd, static_cast<uint16_t>(HandshakeStatus::kOk), left_ms(cfg.deadline_ms)).ok())
    return *why = "preamble answer not sent", false;

  peer->role = static_cast<Role>(role);
  if (!random_bytes(peer->server_nonce.data(), peer->server_nonce.size()))
    return reject(ErrorCode::kInternal, "no random bytes for a nonce");
  Writer challenge;
  challenge.raw(peer->server_nonce.data(), peer->server_nonce.size());
  if (!write_frame(fd, MsgType::kChallenge, challenge.bytes(), left_ms(cfg.deadline_ms)).ok())
    return *why = "CHALLENGE not sent", false;

  Frame f;
  io = read_frame(fd, &f, left_ms(cfg.deadline_ms), left_ms(cfg.deadline_ms), kMaxPreAuthFrameBytes);
  if (io.kind == IoStatus::kTimeout) return reject(ErrorCode::kProtocol, "no HELLO within the handshake deadline");
  if (io.kind == IoStatus::kClosed) return *why = "closed before HELLO", false;
  if (io.kind == IoStatus::kTooLarge) return reject(ErrorCode::kTooLarge, io.message);
  if (!io.ok()) return reject(ErrorCode::kProtocol, io.message);
  if (f.type != MsgType::kHello) return reject(ErrorCode::kProtocol, "expected HELLO");
  Reader hello(f.body);
  peer->name = hello.str();
  hello.raw(peer->client_nonce.data(), peer->client_nonce.size());
  uint8_t proof[kProofBytes];
  hello.raw(proof, sizeof proof);
  if (!hello.done()) return reject(ErrorCode::kProtocol, "malformed HELLO");
  Digest want = handshake_proof(cfg.auth_key, peer->server_nonce, peer->client_nonce, peer->role, kClientProofContext);
  if (!equal_constant_time(want.data(), proof, kProofBytes))
    return reject(ErrorCode::kAuth, cfg.auth_key.empty() ? "the client has an auth key and this side has none"
                                                         : "wrong auth key proof");
  return true;
}

IoStatus send_welcome(int fd, std::string_view auth_key, const AcceptedPeer& peer, const ServerInfo& info,
                      int timeout_ms) {
  Digest proof = handshake_proof(auth_key, peer.server_nonce, peer.client_nonce, peer.role, kServerProofContext);
  Writer w;
  w.raw(proof.data(), proof.size());
  encode_server_info(w, info);
  return write_frame(fd, MsgType::kWelcome, w.bytes(), timeout_ms);
}

}  // namespace kiln::rpc
