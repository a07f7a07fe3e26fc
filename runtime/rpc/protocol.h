/// \file The kiln RPC wire protocol: handshake, frames, typed messages and their bounds.
///
/// Device servers, the tracker and clients all speak it (docs/rpc.md is the prose version). It lives
/// apart from the server and client so both ends share one definition of every size limit, and so it
/// needs nothing but libc: the same file is cross-compiled into the AArch64 server.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::rpc {

// ---- constants every peer agrees on -------------------------------------------------------------

/// "KRPC" in the first four bytes of every connection, so a stray HTTP client or port scanner is told
/// apart from a peer before anything is allocated for it.
inline constexpr uint8_t kMagic[4] = {'K', 'R', 'P', 'C'};
/// Bumped whenever a message layout changes; peers of different versions refuse each other.
inline constexpr uint16_t kProtocolVersion = 3;  // 2: RunSpec.threads and slow_call_ms; 3: CHALLENGE, HMAC proofs

/// Limits. Every length read off the wire is checked against one of these before memory is reserved,
/// so a hostile or broken peer can cost the server at most these amounts per session.
inline constexpr uint32_t kMaxFrameBytes = 80u << 20;          // one frame, type byte included
inline constexpr uint32_t kMaxPreAuthFrameBytes = 4096;        // any frame before the handshake completed
inline constexpr uint32_t kFrameChunkBytes = 1u << 20;         // a frame body is read (and grown) this much at most at a time
inline constexpr uint32_t kMaxUploadBytes = 64u << 20;         // one uploaded shared object
inline constexpr uint32_t kMaxModulesPerSession = 1024;        // uploads kept per session
inline constexpr uint16_t kMaxBuffers = 64;                    // kernel parameters per run
inline constexpr uint16_t kMaxRunThreads = 256;                // threads of one run's parallel loops
inline constexpr uint64_t kMaxBufferBytesTotal = 1ull << 30;   // sum of all buffer sizes of one run
inline constexpr uint32_t kMaxOutputBytes = 64u << 20;         // output bytes sent back per run
inline constexpr uint16_t kMaxStringBytes = 256;               // names, keys, messages
inline constexpr size_t kNonceBytes = 32;                      // CHALLENGE and HELLO nonces
inline constexpr size_t kProofBytes = 32;                      // HMAC-SHA256 proofs in HELLO and WELCOME
inline constexpr uint32_t kMaxRepeat = 1000;                   // repeats per run
inline constexpr uint32_t kMaxNumber = 1u << 30;               // calls per repeat (after growth)
inline constexpr uint32_t kMaxStatusEntries = 1024;            // keys in a tracker status reply

/// Who opens the connection; sent in the preamble so a tracker knows whether it is talking to a
/// device server (which registers) or a tuner (which requests devices).
enum class Role : uint16_t { kClient = 1, kDeviceServer = 2, kTrackerClient = 3 };

/// Answer to the preamble.
enum class HandshakeStatus : uint16_t { kOk = 0, kBadMagic = 1, kBadVersion = 2, kBadRole = 3 };

/// Message types: the first byte of every frame payload.
enum class MsgType : uint8_t {
  kHello = 1,       // c->s: client name, client nonce, client proof
  kWelcome = 2,     // s->c: server proof, server arch, key, session timeout
  kError = 3,       // s->c: ErrorCode + message; the sender closes the connection after it
  kUpload = 4,      // c->s: suggested name (checked, not used as a path), shared object bytes
  kUploaded = 5,    // s->c: module id
  kRun = 6,         // c->s: RunSpec
  kResult = 7,      // s->c: RunOutcome
  kBye = 8,         // c->s: end the session now
  kChallenge = 9,   // s->c: the accepting side's nonce, right after the preamble answer
  kRegister = 20,   // device server -> tracker: key, host, port
  kRegistered = 21, // tracker -> device server
  kHeartbeat = 22,  // device server -> tracker: still alive
  kRequest = 23,    // tuner -> tracker: key, priority
  kAssigned = 24,   // tracker -> tuner: lease id, host, port
  kRelease = 25,    // tuner -> tracker: lease id
  kStatus = 26,     // tuner -> tracker: ask for per-key counts
  kStatusReply = 27 // tracker -> tuner: KeyStatus list
};

/// Why a server or tracker ended a session. Sent in an kError frame; the connection closes after it.
enum class ErrorCode : uint8_t {
  kProtocol = 1,        // malformed frame or message, unexpected message type, truncated frame
  kBadMagic = 2,        // the preamble did not start with kMagic
  kBadVersion = 3,      // protocol versions differ
  kAuth = 4,            // the HELLO's proof of the auth key did not verify, or an unauthenticated REGISTER
  kTooLarge = 5,        // a frame, upload, buffer list or output exceeded its limit
  kBadName = 6,         // an upload name that is not a plain file name (e.g. "../x")
  kNoModule = 7,        // a run named a module id this session never uploaded
  kSessionTimeout = 8,  // the client was idle longer than the session timeout
  kBusy = 9,            // too many concurrent sessions, or the tracker's request queue is full
  kInternal = 10,       // the server failed (disk full, fork failed, ...)
};

/// How a run ended on the device. Only these three come from the server; the client adds its own
/// codes for sessions that broke (see rpc_client.h).
enum class RunStatus : uint8_t { kNone = 0, kRuntimeDevice = 1, kRunTimeout = 2 };

/// Element types of kernel buffers, so the server can fill inputs with values that make sense for the
/// type (floats in [-1, 1], integers 0..2, bools 0..1).
enum class DType : uint8_t { kF32 = 0, kF64 = 1, kI32 = 2, kI64 = 3, kU8 = 4, kBool = 5 };

/// Bytes per element of a dtype.
size_t dtype_bytes(DType t);
/// "f32", "i64", ...; "?" for values off the enum (they come from the wire).
const char* dtype_name(DType t);
/// Short lowercase names for logs and error messages.
const char* error_code_name(ErrorCode c);
const char* run_status_name(RunStatus s);

// ---- encoding -------------------------------------------------------------------------------------

/// Appends little-endian fields to a message body. Strings carry a u16 length, blobs a u32 length;
/// the writer does not check limits (the reader on the other end does).
class Writer {
 public:
  void u8(uint8_t v) { buf_.push_back(v); }
  void u16(uint16_t v);
  void u32(uint32_t v);
  void u64(uint64_t v);
  void i32(int32_t v) { u32(static_cast<uint32_t>(v)); }
  void f64(double v);
  void str(std::string_view s);
  void blob(const void* data, size_t n);
  /// Fixed-size bytes with no length (nonces, proofs).
  void raw(const void* data, size_t n);
  const std::vector<uint8_t>& bytes() const { return buf_; }
  std::vector<uint8_t>& bytes() { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

/// Reads little-endian fields back with a bounds check on every read. A failed read sets a sticky
/// failure flag and yields zeros, so a decoder reads every field and checks ok() once at the end.
class Reader {
 public:
  Reader(const uint8_t* data, size_t n) : p_(data), end_(data + n) {}
  explicit Reader(const std::vector<uint8_t>& v) : Reader(v.data(), v.size()) {}
  uint8_t u8();
  uint16_t u16();
  uint32_t u32();
  uint64_t u64();
  int32_t i32() { return static_cast<int32_t>(u32()); }
  double f64();
  /// A string of at most max_len bytes; longer fails the reader.
  std::string str(size_t max_len = kMaxStringBytes);
  /// A blob of at most max_len bytes, returned as a view into the frame (valid while it lives).
  std::pair<const uint8_t*, size_t> blob(size_t max_len);
  /// Exactly n fixed-size bytes into out (zeros and a failed reader when fewer are left).
  void raw(uint8_t* out, size_t n);
  bool ok() const { return ok_; }
  /// True when every byte was consumed and no read failed: trailing garbage is a protocol error too.
  bool done() const { return ok_ && p_ == end_; }
  void fail() { ok_ = false; }

 private:
  bool take(size_t n, const uint8_t** out);
  const uint8_t* p_;
  const uint8_t* end_;
  bool ok_ = true;
};

// ---- messages -------------------------------------------------------------------------------------

/// One kernel parameter of a run: its size, element type, and whether the server fills it with seeded
/// random data (input) and/or sends its final bytes back (output).
struct BufferSpec {
  uint64_t bytes = 0;
  DType dtype = DType::kF32;
  bool input = false;
  bool output = false;
};

/// What to run and how to time it. Mirrors TVM's time_evaluator knobs: `number` calls per repeat
/// (grown until one repeat lasts min_repeat_ms), `repeat` timed repeats after one untimed warm-up run.
struct RunSpec {
  uint32_t module = 0;
  std::string func;
  std::vector<BufferSpec> buffers;
  uint64_t seed = 0;
  uint32_t number = 1;
  uint32_t repeat = 1;
  uint32_t min_repeat_ms = 0;
  bool cache_flush = false;
  uint32_t run_timeout_ms = 10000;
  /// Threads the kernel's parallel loops use (a kiln_pthread pool); 1 runs them on the calling thread.
  uint16_t threads = 1;
  /// When > 0: a first (untimed) call slower than this many ms is the measurement, without repeats.
  uint32_t slow_call_ms = 0;
};

/// What came back from one run: per-repeat seconds per call, the output buffers (index -> bytes) and a
/// status with a one-line message when it is not kNone.
struct RunOutcome {
  RunStatus status = RunStatus::kNone;
  std::string message;
  std::vector<double> costs;
  std::vector<std::pair<uint16_t, std::vector<uint8_t>>> outputs;
};

/// What the accepting side says about itself in WELCOME, after its proof (device servers fill every
/// field; the tracker sends arch "tracker" and zeros).
struct ServerInfo {
  std::string arch, key;
  uint32_t session_timeout_ms = 0, max_upload_bytes = 0, max_run_timeout_ms = 0;
};
void encode_server_info(Writer& w, const ServerInfo& i);
bool decode_server_info(Reader& r, ServerInfo* i);

/// Per-key pool counts the tracker reports.
struct KeyStatus {
  std::string key;
  uint32_t total = 0;    // registered, live servers
  uint32_t free = 0;     // of those, not leased
  uint32_t pending = 0;  // requests waiting for a server
};

void encode_run_spec(Writer& w, const RunSpec& s);
/// Decodes and validates a RunSpec: buffer count, total bytes, output bytes, repeat bounds. On failure
/// returns false with `why` naming the field (and sets *too_large when a size limit was the cause).
bool decode_run_spec(Reader& r, RunSpec* s, std::string* why, bool* too_large);
void encode_run_outcome(Writer& w, const RunOutcome& o);
bool decode_run_outcome(Reader& r, RunOutcome* o);
void encode_status(Writer& w, const std::vector<KeyStatus>& s);
bool decode_status(Reader& r, std::vector<KeyStatus>* s);

/// A client-suggested upload name is accepted only if it is a plain file name: 1..128 bytes of
/// [A-Za-z0-9._-], not starting with '.', no "..". The server never uses it as a path anyway (it picks
/// its own), but rejecting "../x" tells a confused or hostile client so.
bool is_valid_upload_name(std::string_view name);

/// Fills one buffer with the deterministic inputs the server uses: the same (seed, index, dtype)
/// gives the same bytes on every machine, so a client can recompute the inputs to check outputs.
void fill_random(void* data, uint64_t bytes, DType dtype, uint64_t seed, uint32_t buffer_index);

// ---- framing over a socket ------------------------------------------------------------------------

/// Result of a socket read or write: ok, timed out (nothing or not enough arrived in time), closed by
/// the peer, or a protocol violation (bad length). `message` says which.
struct IoStatus {
  enum Kind { kOk, kTimeout, kClosed, kProtocol, kTooLarge } kind = kOk;
  std::string message;
  bool ok() const { return kind == kOk; }
};

/// One frame: message type + body.
struct Frame {
  MsgType type{};
  std::vector<uint8_t> body;
};

/// Writes the 8-byte preamble: magic, version, and a role (client side) or status (answer).
IoStatus write_preamble(int fd, uint16_t role_or_status, int timeout_ms);
/// Reads a preamble; returns its raw fields so the caller decides what a mismatch means.
IoStatus read_preamble(int fd, uint8_t magic[4], uint16_t* version, uint16_t* role_or_status, int timeout_ms);

/// Reads one frame. `idle_timeout_ms` bounds the wait for the first byte (the session timeout);
/// `frame_timeout_ms` bounds the rest of the frame once it started. kTimeout and kClosed therefore mean
/// "idle" and "closed between frames"; a frame cut short (stall or close) is kProtocol, a length of 0
/// is kProtocol, a length above max_bytes is kTooLarge. The body buffer grows with the bytes that
/// actually arrived (at most kFrameChunkBytes per read, at most doubling what was received), never to
/// the announced length up front: a header announcing 80 MiB followed by silence costs 64 KiB.
IoStatus read_frame(int fd, Frame* out, int idle_timeout_ms, int frame_timeout_ms, uint32_t max_bytes = kMaxFrameBytes);
/// Writes one frame (4-byte length, type, body).
IoStatus write_frame(int fd, MsgType type, const std::vector<uint8_t>& body, int timeout_ms);
/// Writes an kError frame; failures are ignored because the connection is being dropped anyway.
void send_error(int fd, ErrorCode code, std::string_view message, int timeout_ms = 2000);

}  // namespace kiln::rpc
