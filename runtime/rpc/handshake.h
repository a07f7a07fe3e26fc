/// \file The connection handshake shared by device servers and the tracker (accepting side) and by
/// clients, tuners and registering servers (connecting side): preamble, CHALLENGE, HELLO, WELCOME.
///
/// It exists so no listener runs code for a peer that has not proved it knows the auth key, and so
/// the key itself never crosses the network: the accepting side sends a fresh random nonce, the
/// connecting side answers with its own nonce and HMAC-SHA256(key, server nonce || client nonce ||
/// role || "kiln-rpc/3 client proof"), and the accepting side proves itself back in WELCOME with the
/// same over "kiln-rpc/3 server proof" (so a tuner never trusts timings from an impostor). Without a
/// configured key (loopback only, see auth_key.h) both sides use the empty key: the same bytes and the
/// same code path, just no secret. The byte layout is in docs/rpc.md.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/rpc/hmac_sha256.h"
#include "runtime/rpc/protocol.h"

namespace kiln::rpc {

using Nonce = std::array<uint8_t, kNonceBytes>;

/// The fixed context strings of the two proofs (different, so one side's proof never serves as the
/// other's).
inline constexpr std::string_view kClientProofContext = "kiln-rpc/3 client proof";
inline constexpr std::string_view kServerProofContext = "kiln-rpc/3 server proof";

/// Fills out with n bytes from the kernel's CSPRNG (getrandom, else /dev/urandom); false when neither
/// works (the handshake then fails rather than use a guessable nonce).
bool random_bytes(void* out, size_t n);

/// HMAC-SHA256(key, server_nonce || client_nonce || u16le role || context).
Digest handshake_proof(std::string_view key, const Nonce& server_nonce, const Nonce& client_nonce, Role role,
                       std::string_view context);

/// What the accepting side learned from a peer that completed its half of the handshake.
struct AcceptedPeer {
  Role role = Role::kClient;
  std::string name;  // HELLO's client name, for logs
  Nonce server_nonce{}, client_nonce{};
};

/// How the accepting side runs the handshake.
struct AcceptConfig {
  std::string_view auth_key;    // empty: no key configured (loopback listener)
  uint32_t allowed_roles = 0;   // bit (1 << role) per role served here
  int64_t deadline_ms = 0;      // monotonic_ms() by which HELLO must have arrived
};

/// Runs the accepting side from the preamble through HELLO. True with *peer filled when the peer
/// proved the key; otherwise the peer has been answered (preamble status or ERROR frame, then
/// drain_before_close) and *why says what went wrong, for the log. Frames before this returns are
/// limited to kMaxPreAuthFrameBytes.
bool accept_handshake(int fd, const AcceptConfig& cfg, AcceptedPeer* peer, std::string* why);

/// Sends WELCOME: the accepting side's proof, then `info`.
IoStatus send_welcome(int fd, std::string_view auth_key, const AcceptedPeer& peer, const ServerInfo& info,
                      int timeout_ms);

}  // namespace kiln::rpc
