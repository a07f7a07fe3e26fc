// Client sessions and tracker connections. Every failure becomes a ClientError or a RunError value.
#include "runtime/rpc/rpc_client.h"

#include <signal.h>
#include <string.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <mutex>

#include "runtime/rpc/auth_key.h"
#include "runtime/rpc/handshake.h"

namespace kiln::rpc {

namespace {

ClientError io_error(const IoStatus& io) {
  ClientError e;
  e.kind = io.kind == IoStatus::kTimeout ? ClientError::kTimeout
         : io.kind == IoStatus::kClosed  ? ClientError::kClosed
                                         : ClientError::kProtocol;
  e.message = io.message;
  return e;
}

// The server's ERROR frame as a ClientError.
ClientError rejected(const Frame& f) {
  Reader r(f.body);
  ClientError e;
  e.kind = ClientError::kRejected;
  e.server_code = static_cast<ErrorCode>(r.u8());
  std::string msg = r.str();
  e.message = std::string("rejected (") + error_code_name(e.server_code) + "): " + msg;
  return e;
}

void ignore_sigpipe_once() {
  static std::once_flag once;
  std::call_once(once, [] { signal(SIGPIPE, SIG_IGN); });
}

}  // namespace

Expected<Fd> connect_authenticated(const std::string& host, uint16_t port, Role role, const ConnectOptions& opts,
                                   ServerInfo* info) {
  ignore_sigpipe_once();
  std::string error;
  Fd fd = connect_tcp(host, port, opts.connect_timeout_ms, &error);
  if (!fd.valid()) return ClientError{ClientError::kConnect, ErrorCode::kProtocol, error};
  IoStatus io = write_preamble(fd.get(), static_cast<uint16_t>(role), opts.io_timeout_ms);
  if (!io.ok()) return io_error(io);
  uint8_t magic[4];
  uint16_t version = 0, status = 0;
  io = read_preamble(fd.get(), magic, &version, &status, opts.io_timeout_ms);
  if (!io.ok()) return io_error(io);
  if (memcmp(magic, kMagic, 4) != 0)
    return ClientError{ClientError::kHandshake, ErrorCode::kBadMagic, "peer is not a kiln RPC server"};
  if (status != 0) {
    const char* why = status == static_cast<uint16_t>(HandshakeStatus::kBadVersion) ? "protocol version mismatch"
                      : status == static_cast<uint16_t>(HandshakeStatus::kBadRole) ? "peer refuses this role"
                                                                                   : "peer refused the handshake";
    return ClientError{ClientError::kHandshake, ErrorCode::kBadVersion,
                       std::string(why) + " (peer version " + std::to_string(version) + ")"};
  }
  // CHALLENGE: the peer's nonce. Everything before WELCOME's proof verified comes from a peer not yet
  // known to hold the key, so it is read under the small pre-auth frame limit.
  Frame f;
  io = read_frame(fd.get(), &f, opts.io_timeout_ms, opts.io_timeout_ms, kMaxPreAuthFrameBytes);
  if (!io.ok()) return io_error(io);
  if (f.type == MsgType::kError) return rejected(f);
  Nonce server_nonce{}, client_nonce{};
  Reader challenge(f.body);
  challenge.raw(server_nonce.data(), server_nonce.size());
  if (f.type != MsgType::kChallenge || !challenge.done())
    return ClientError{ClientError::kProtocol, ErrorCode::kProtocol, "expected CHALLENGE"};
  if (!random_bytes(client_nonce.data(), client_nonce.size()))
    return ClientError{ClientError::kHandshake, ErrorCode::kInternal, "no random bytes for a nonce"};
  Digest proof = handshake_proof(opts.auth_key, server_nonce, client_nonce, role, kClientProofContext);
  Writer hello;
  hello.str(opts.client_name.substr(0, kMaxStringBytes));
  hello.raw(client_nonce.data(), client_nonce.size());
  hello.raw(proof.data(), proof.size());
  io = write_frame(fd.get(), MsgType::kHello, hello.bytes(), opts.io_timeout_ms);
  if (!io.ok()) return io_error(io);
  io = read_frame(fd.get(), &f, opts.io_timeout_ms, opts.io_timeout_ms, kMaxPreAuthFrameBytes);
  if (!io.ok()) return io_error(io);
  if (f.type == MsgType::kError) {
    ClientError e = rejected(f);
    if (e.server_code == ErrorCode::kAuth)
      e.message += " (the auth keys differ: check --auth-key-file / " + std::string(kAuthKeyEnv) + " on both sides)";
    return e;
  }
  if (f.type != MsgType::kWelcome) return ClientError{ClientError::kProtocol, ErrorCode::kProtocol, "expected WELCOME"};
  Reader r(f.body);
  uint8_t server_proof[kProofBytes];
  r.raw(server_proof, sizeof server_proof);
  Digest want = handshake_proof(opts.auth_key, server_nonce, client_nonce, role, kServerProofContext);
  if (!r.ok() || !equal_constant_time(want.data(), server_proof, kProofBytes))
    return ClientError{ClientError::kHandshake, ErrorCode::kAuth,
                       "the peer could not prove it knows the auth key (an impostor, or the keys differ)"};
  ServerInfo si;
  if (!decode_server_info(r, &si)) return ClientError{ClientError::kProtocol, ErrorCode::kProtocol, "malformed WELCOME"};
  if (info) *info = si;
  return fd;
}

const char* run_error_name(RunError e) {
  switch (e) {
    case RunError::kNone: return "none";
    case RunError::kRuntimeDevice: return "runtime-device";
    case RunError::kRunTimeout: return "run-timeout";
    case RunError::kSessionTimeout: return "session-timeout";
    case RunError::kConnection: return "connection";
    case RunError::kRejected: return "rejected";
  }
  return "unknown";
}

// ---- Session -------------------------------------------------------------------------------------

Expected<Session> Session::connect(const std::string& host, uint16_t port, const ConnectOptions& opts) {
  ServerInfo info;
  auto fd = connect_authenticated(host, port, Role::kClient, opts, &info);
  if (!fd.ok()) return fd.error();
  Session s(std::move(fd.value()), opts);
  s.info_ = info;
  return s;
}

ClientError Session::fail(ClientError e) {
  fd_.reset();
  return e;
}

bool Session::pending_error(ClientError* e) {
  // The server only speaks unprompted to say goodbye (an idle session timed out): read that before
  // sending a request into a closed connection, so the reason is not lost to a reset.
  if (wait_readable(fd_.get(), 0) <= 0) return false;
  Frame f;
  IoStatus io = read_frame(fd_.get(), &f, 1000, 1000, 4096);
  if (!io.ok()) *e = io_error(io);
  else if (f.type == MsgType::kError) *e = rejected(f);
  else *e = ClientError{ClientError::kProtocol, ErrorCode::kProtocol, "unexpected message from the server"};
  fail(*e);
  return true;
}

Expected<uint32_t> Session::upload(const std::string& name, const std::vector<uint8_t>& bytes) {
  if (!fd_.valid()) return ClientError{ClientError::kClosed, ErrorCode::kProtocol, "session is closed"};
  ClientError pending;
  if (pending_error(&pending)) return pending;
  Writer w;
  w.str(name);
  w.blob(bytes.data(), bytes.size());
  IoStatus io = write_frame(fd_.get(), MsgType::kUpload, w.bytes(), opts_.io_timeout_ms);
  if (!io.ok()) return fail(io_error(io));
  Frame f;
  io = read_frame(fd_.get(), &f, opts_.io_timeout_ms, opts_.io_timeout_ms, 4096);
  if (!io.ok()) return fail(io_error(io));
  if (f.type == MsgType::kError) return fail(rejected(f));
  Reader r(f.body);
  uint32_t id = r.u32();
  if (f.type != MsgType::kUploaded || !r.done())
    return fail(ClientError{ClientError::kProtocol, ErrorCode::kProtocol, "expected UPLOADED"});
  return id;
}

Expected<uint32_t> Session::upload_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ClientError{ClientError::kProtocol, ErrorCode::kProtocol, "cannot read " + path};
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto slash = path.find_last_of('/');
  return upload(slash == std::string::npos ? path : path.substr(slash + 1), bytes);
}

RunResult Session::run(const RunRequest& req) {
  RunResult out;
  auto broken = [&](const ClientError& e) {
    out.error = e.kind == ClientError::kRejected
                    ? (e.server_code == ErrorCode::kSessionTimeout ? RunError::kSessionTimeout : RunError::kRejected)
                    : RunError::kConnection;
    out.message = e.message;
    fail(e);
    return out;
  };
  if (!fd_.valid()) return broken(ClientError{ClientError::kClosed, ErrorCode::kProtocol, "session is closed"});
  ClientError pending;
  if (pending_error(&pending)) return broken(pending);
  Writer w;
  encode_run_spec(w, req);
  IoStatus io = write_frame(fd_.get(), MsgType::kRun, w.bytes(), opts_.io_timeout_ms);
  if (!io.ok()) return broken(io_error(io));
  Frame f;
  int wait = static_cast<int>(std::min<int64_t>(int64_t{req.run_timeout_ms} + opts_.io_timeout_ms, 1 << 30));
  io = read_frame(fd_.get(), &f, wait, opts_.io_timeout_ms);
  if (!io.ok()) return broken(io_error(io));
  if (f.type == MsgType::kError) return broken(rejected(f));
  RunOutcome o;
  Reader r(f.body);
  if (f.type != MsgType::kResult || !decode_run_outcome(r, &o))
    return broken(ClientError{ClientError::kProtocol, ErrorCode::kProtocol, "malformed RESULT"});
  out.error = static_cast<RunError>(o.status);
  out.message = std::move(o.message);
  out.costs = std::move(o.costs);
  out.outputs.resize(req.buffers.size());
  for (auto& [index, bytes] : o.outputs)
    if (index < out.outputs.size()) out.outputs[index] = std::move(bytes);
  return out;
}

void Session::close() {
  if (!fd_.valid()) return;
  (void)write_frame(fd_.get(), MsgType::kBye, {}, 1000);
  fd_.reset();
}

// ---- TrackerClient -------------------------------------------------------------------------------

Expected<TrackerClient> TrackerClient::connect(const std::string& host, uint16_t port, const ConnectOptions& opts) {
  auto fd = connect_authenticated(host, port, Role::kTrackerClient, opts, nullptr);
  if (!fd.ok()) return fd.error();
  return TrackerClient(std::move(fd.value()), opts);
}

Expected<Frame> TrackerClient::await(MsgType want, uint32_t request_id, int timeout_ms) {
  int64_t deadline = monotonic_ms() + timeout_ms;
  for (;;) {
    int left = static_cast<int>(std::max<int64_t>(0, deadline - monotonic_ms()));
    Frame f;
    IoStatus io = read_frame(fd_.get(), &f, left, opts_.io_timeout_ms, 1 << 20);
    if (!io.ok()) {
      if (io.kind != IoStatus::kTimeout) fd_.reset();
      return io_error(io);
    }
    if (f.type == MsgType::kError) {
      fd_.reset();
      return rejected(f);
    }
    if (f.type == MsgType::kAssigned) {
      Reader r(f.body);
      uint32_t id = r.u32();
      uint64_t lease = r.u64();
      if (want != MsgType::kAssigned || id != request_id) {
        // A grant for a request this client already gave up on: hand the device straight back.
        Writer w;
        w.u64(lease);
        (void)write_frame(fd_.get(), MsgType::kRelease, w.bytes(), opts_.io_timeout_ms);
        continue;
      }
    }
    if (f.type != want) {
      fd_.reset();
      return ClientError{ClientError::kProtocol, ErrorCode::kProtocol, "unexpected message from the tracker"};
    }
    return f;
  }
}

Expected<Lease> TrackerClient::request(const std::string& key, int32_t priority, int timeout_ms) {
  if (!fd_.valid()) return ClientError{ClientError::kClosed, ErrorCode::kProtocol, "tracker connection is closed"};
  uint32_t id = next_request_++;
  Writer w;
  w.u32(id);
  w.str(key);
  w.i32(priority);
  IoStatus io = write_frame(fd_.get(), MsgType::kRequest, w.bytes(), opts_.io_timeout_ms);
  if (!io.ok()) {
    fd_.reset();
    return io_error(io);
  }
  auto f = await(MsgType::kAssigned, id, timeout_ms);
  if (!f.ok()) {
    ClientError e = f.error();
    if (e.kind == ClientError::kTimeout) e.message = "no '" + key + "' device free within " + std::to_string(timeout_ms) + " ms";
    return e;
  }
  Reader r(f.value().body);
  Lease lease;
  (void)r.u32();
  lease.id = r.u64();
  lease.host = r.str();
  lease.port = r.u16();
  if (!r.done()) return ClientError{ClientError::kProtocol, ErrorCode::kProtocol, "malformed ASSIGNED"};
  return lease;
}

bool TrackerClient::release(const Lease& lease) {
  if (!fd_.valid()) return false;
  Writer w;
  w.u64(lease.id);
  if (write_frame(fd_.get(), MsgType::kRelease, w.bytes(), opts_.io_timeout_ms).ok()) return true;
  fd_.reset();
  return false;
}

Expected<std::vector<KeyStatus>> TrackerClient::status() {
  if (!fd_.valid()) return ClientError{ClientError::kClosed, ErrorCode::kProtocol, "tracker connection is closed"};
  IoStatus io = write_frame(fd_.get(), MsgType::kStatus, {}, opts_.io_timeout_ms);
  if (!io.ok()) {
    fd_.reset();
    return io_error(io);
  }
  auto f = await(MsgType::kStatusReply, 0, opts_.io_timeout_ms);
  if (!f.ok()) return f.error();
  Reader r(f.value().body);
  std::vector<KeyStatus> out;
  if (!decode_status(r, &out)) return ClientError{ClientError::kProtocol, ErrorCode::kProtocol, "malformed STATUS"};
  return out;
}

std::string format_status(const std::vector<KeyStatus>& keys) {
  std::string out = "key                  total  free  pending\n";
  char line[512];
  for (const auto& k : keys) {
    snprintf(line, sizeof line, "%-20s %5u %5u %8u\n", k.key.c_str(), k.total, k.free, k.pending);
    out += line;
  }
  if (keys.empty()) out += "(no servers registered, no requests pending)\n";
  return out;
}

}  // namespace kiln::rpc
