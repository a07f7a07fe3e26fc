/// \file The RPC auth key: where it comes from (a key file or KILN_RPC_AUTH_KEY) and when one is
/// required (any listener that is not loopback-only).
///
/// The auth key is the shared secret servers, the tracker and tuners prove to each other in the
/// handshake (handshake.h). It is not the *device* key (`--key rk3588`, the `KEY` in
/// rpc://HOST:PORT/KEY), which only names a pool. It never travels on the wire.
#pragma once
#include <string>

namespace kiln::rpc {

/// The environment variable read when no key file is given.
inline constexpr const char* kAuthKeyEnv = "KILN_RPC_AUTH_KEY";
/// Shortest accepted key. A key guessable offline from one recorded handshake (nonce and proof are
/// public) is no key; 16 bytes rules out the worst passwords, docs/rpc.md says how to make a good one.
inline constexpr size_t kMinAuthKeyBytes = 16;
inline constexpr size_t kMaxAuthKeyBytes = 4096;

/// Reads the auth key: the contents of `key_file` when it is non-empty (one trailing newline dropped;
/// the file must not be readable by group or others, like an ssh key), else $KILN_RPC_AUTH_KEY, else
/// none (*key empty). False with a one-line `error` for an unreadable, too open, too short or too
/// long key.
bool load_auth_key(const std::string& key_file, std::string* key, std::string* error);

/// True when every address `host` resolves to is a loopback address (127.0.0.0/8, ::1); false for
/// "", "0.0.0.0", "::" and every other address.
bool is_loopback_host(const std::string& host);

/// The rule for listeners: loopback may run without a key (local tuning and tests), anything else
/// needs one. False with a one-line `error` naming the fix otherwise.
bool check_listen_policy(const std::string& host, const std::string& key, std::string* error);

}  // namespace kiln::rpc
