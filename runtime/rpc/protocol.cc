// Encoding, decoding and framing of the RPC protocol. Every length from the wire is checked against a
// limit from protocol.h before anything is allocated for it.
#include "runtime/rpc/protocol.h"

#include <algorithm>
#include <cstring>

#include "runtime/rpc/net.h"

namespace kiln::rpc {

namespace {

IoStatus from_io(IoResult r, const char* what) {
  switch (r) {
    case IoResult::kOk: return {};
    case IoResult::kTimeout: return {IoStatus::kTimeout, std::string(what) + ": timed out"};
    case IoResult::kClosed: return {IoStatus::kClosed, std::string(what) + ": connection closed"};
    case IoResult::kError: break;
  }
  return {IoStatus::kClosed, std::string(what) + ": socket error"};
}

// splitmix64: tiny, fast, identical on every platform, good enough to make test inputs.
uint64_t splitmix(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

size_t dtype_bytes(DType t) {
  switch (t) {
    case DType::kF32: case DType::kI32: return 4;
    case DType::kF64: case DType::kI64: return 8;
    case DType::kU8: case DType::kBool: return 1;
  }
  return 1;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kU8: return "u8";
    case DType::kBool: return "bool";
  }
  return "?";
}

const char* error_code_name(ErrorCode c) {
  switch (c) {
    case ErrorCode::kProtocol: return "protocol";
    case ErrorCode::kBadMagic: return "bad-magic";
    case ErrorCode::kBadVersion: return "bad-version";
    case ErrorCode::kAuth: return "auth";
    case ErrorCode::kTooLarge: return "too-large";
    case ErrorCode::kBadName: return "bad-name";
    case ErrorCode::kNoModule: return "no-module";
    case ErrorCode::kSessionTimeout: return "session-timeout";
    case ErrorCode::kBusy: return "busy";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

const char* run_status_name(RunStatus s) {
  switch (s) {
    case RunStatus::kNone: return "none";
    case RunStatus::kRuntimeDevice: return "runtime-device";
    case RunStatus::kRunTimeout: return "run-timeout";
  }
  return "unknown";
}

// ---- Writer / Reader ---------------------------------------------------------------------------

void Writer::u16(uint16_t v) {
  u8(static_cast<uint8_t>(v));
  u8(static_cast<uint8_t>(v >> 8));
}
void Writer::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
}
void Writer::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) u8(static_cast<uint8_t>(v >> (8 * i)));
}
void Writer::f64(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  u64(bits);
}
void Writer::str(std::string_view s) {
  u16(static_cast<uint16_t>(s.size()));
  buf_.insert(buf_.end(), s.begin(), s.end());
}
void Writer::blob(const void* data, size_t n) {
  u32(static_cast<uint32_t>(n));
  auto* p = static_cast<const uint8_t*>(data);
  buf_.insert(buf_.end(), p, p + n);
}

void Writer::raw(const void* data, size_t n) {
  auto* p = static_cast<const uint8_t*>(data);
  buf_.insert(buf_.end(), p, p + n);
}

void Reader::raw(uint8_t* out, size_t n) {
  const uint8_t* p;
  if (take(n, &p)) std::memcpy(out, p, n);
  else std::memset(out, 0, n);
}

bool Reader::take(size_t n, const uint8_t** out) {
  if (!ok_ || static_cast<size_t>(end_ - p_) < n) {
    ok_ = false;
    return false;
  }
  *out = p_;
  p_ += n;
  return true;
}
uint8_t Reader::u8() {
  const uint8_t* p;
  return take(1, &p) ? p[0] : 0;
}
uint16_t Reader::u16() {
  const uint8_t* p;
  return take(2, &p) ? static_cast<uint16_t>(p[0] | (p[1] << 8)) : 0;
}
uint32_t Reader::u32() {
  const uint8_t* p;
  if (!take(4, &p)) return 0;
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
uint64_t Reader::u64() {
  const uint8_t* p;
  if (!take(8, &p)) return 0;
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
double Reader::f64() {
  uint64_t bits = u64();
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
std::string Reader::str(size_t max_len) {
  size_t n = u16();
  const uint8_t* p;
  if (n > max_len) {
    ok_ = false;
    return {};
  }
  return take(n, &p) ? std::string(reinterpret_cast<const char*>(p), n) : std::string();
}
std::pair<const uint8_t*, size_t> Reader::blob(size_t max_len) {
  size_t n = u32();
  const uint8_t* p;
  if (n > max_len) {
    ok_ = false;
    return {nullptr, 0};
  }
  return take(n, &p) ? std::make_pair(p, n) : std::make_pair(static_cast<const uint8_t*>(nullptr), size_t{0});
}

// ---- messages ----------------------------------------------------------------------------------

void encode_run_spec(Writer& w, const RunSpec& s) {
  w.u32(s.module);
  w.str(s.func);
  w.u64(s.seed);
  w.u32(s.number);
  w.u32(s.repeat);
  w.u32(s.min_repeat_ms);
  w.u8(s.cache_flush ? 1 : 0);
  w.u32(s.run_timeout_ms);
  w.u16(s.threads);
  w.u32(s.slow_call_ms);
  w.u16(static_cast<uint16_t>(s.buffers.size()));
  for (const auto& b : s.buffers) {
    w.u64(b.bytes);
    w.u8(static_cast<uint8_t>(b.dtype));
    w.u8(static_cast<uint8_t>((b.input ? 1 : 0) | (b.output ? 2 : 0)));
  }
}

bool decode_run_spec(Reader& r, RunSpec* s, std::string* why, bool* too_large) {
  *too_large = false;
  s->module = r.u32();
  s->func = r.str();
  s->seed = r.u64();
  s->number = r.u32();
  s->repeat = r.u32();
  s->min_repeat_ms = r.u32();
  s->cache_flush = r.u8() != 0;
  s->run_timeout_ms = r.u32();
  s->threads = r.u16();
  s->slow_call_ms = r.u32();
  uint16_t n = r.u16();
  if (!r.ok()) return *why = "run: truncated header", false;
  if (s->threads == 0 || s->threads > kMaxRunThreads)
    return *why = "run: " + std::to_string(s->threads) + " threads, allowed 1.." + std::to_string(kMaxRunThreads),
           false;
  if (n > kMaxBuffers) {
    *too_large = true;
    return *why = "run: " + std::to_string(n) + " buffers, limit " + std::to_string(kMaxBuffers), false;
  }
  uint64_t total = 0, out_total = 0;
  s->buffers.assign(n, {});
  for (auto& b : s->buffers) {
    b.bytes = r.u64();
    uint8_t dt = r.u8(), flags = r.u8();
    if (dt > static_cast<uint8_t>(DType::kBool)) return *why = "run: buffer dtype " + std::to_string(dt) + " unknown", false;
    if (flags > 3) return *why = "run: buffer flags " + std::to_string(flags) + " unknown", false;
    b.dtype = static_cast<DType>(dt);
    b.input = flags & 1;
    b.output = flags & 2;
    if (b.bytes > kMaxBufferBytesTotal || (total += b.bytes) > kMaxBufferBytesTotal) {
      *too_large = true;
      return *why = "run: buffers total more than " + std::to_string(kMaxBufferBytesTotal) + " bytes", false;
    }
    if (b.output && (out_total += b.bytes) > kMaxOutputBytes) {
      *too_large = true;
      return *why = "run: outputs total more than " + std::to_string(kMaxOutputBytes) + " bytes", false;
    }
  }
  if (!r.done()) return *why = "run: truncated or trailing bytes", false;
  if (s->func.empty()) return *why = "run: empty function name", false;
  if (s->number == 0 || s->number > kMaxNumber) return *why = "run: number out of range 1.." + std::to_string(kMaxNumber), false;
  if (s->repeat == 0 || s->repeat > kMaxRepeat) return *why = "run: repeat out of range 1.." + std::to_string(kMaxRepeat), false;
  if (s->run_timeout_ms == 0) return *why = "run: run timeout 0", false;
  return true;
}

void encode_run_outcome(Writer& w, const RunOutcome& o) {
  w.u8(static_cast<uint8_t>(o.status));
  w.str(o.message.substr(0, kMaxStringBytes));
  w.u32(static_cast<uint32_t>(o.costs.size()));
  for (double c : o.costs) w.f64(c);
  w.u16(static_cast<uint16_t>(o.outputs.size()));
  for (const auto& [index, bytes] : o.outputs) {
    w.u16(index);
    w.blob(bytes.data(), bytes.size());
  }
}

bool decode_run_outcome(Reader& r, RunOutcome* o) {
  uint8_t st = r.u8();
  if (st > static_cast<uint8_t>(RunStatus::kRunTimeout)) return false;
  o->status = static_cast<RunStatus>(st);
  o->message = r.str();
  uint32_t nc = r.u32();
  if (nc > kMaxRepeat) return false;
  o->costs.resize(nc);
  for (auto& c : o->costs) c = r.f64();
  uint16_t no = r.u16();
  if (no > kMaxBuffers) return false;
  size_t out_total = 0;
  o->outputs.clear();
  for (uint16_t i = 0; i < no && r.ok(); ++i) {
    uint16_t index = r.u16();
    auto [p, n] = r.blob(kMaxOutputBytes);
    if ((out_total += n) > kMaxOutputBytes) return false;
    o->outputs.emplace_back(index, std::vector<uint8_t>(p, p + n));
  }
  return r.done();
}

void encode_server_info(Writer& w, const ServerInfo& i) {
  w.str(i.arch);
  w.str(i.key);
  w.u32(i.session_timeout_ms);
  w.u32(i.max_upload_bytes);
  w.u32(i.max_run_timeout_ms);
}

bool decode_server_info(Reader& r, ServerInfo* i) {
  i->arch = r.str();
  i->key = r.str();
  i->session_timeout_ms = r.u32();
  i->max_upload_bytes = r.u32();
  i->max_run_timeout_ms = r.u32();
  return r.done();
}

void encode_status(Writer& w, const std::vector<KeyStatus>& s) {
  w.u32(static_cast<uint32_t>(s.size()));
  for (const auto& k : s) {
    w.str(k.key);
    w.u32(k.total);
    w.u32(k.free);
    w.u32(k.pending);
  }
}

bool decode_status(Reader& r, std::vector<KeyStatus>* s) {
  uint32_t n = r.u32();
  if (n > kMaxStatusEntries) return false;
  s->assign(n, {});
  for (auto& k : *s) {
    k.key = r.str();
    k.total = r.u32();
    k.free = r.u32();
    k.pending = r.u32();
  }
  return r.done();
}

bool is_valid_upload_name(std::string_view name) {
  if (name.empty() || name.size() > 128 || name[0] == '.') return false;
  if (name.find("..") != std::string_view::npos) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-';
    if (!ok) return false;
  }
  return true;
}

void fill_random(void* data, uint64_t bytes, DType dtype, uint64_t seed, uint32_t buffer_index) {
  uint64_t state = seed ^ (0xD1B54A32D192ED03ull * (buffer_index + 1));
  auto* p = static_cast<uint8_t*>(data);
  size_t width = dtype_bytes(dtype);
  uint64_t count = bytes / width;
  for (uint64_t i = 0; i < count; ++i, p += width) {
    uint64_t u = splitmix(state);
    switch (dtype) {
      case DType::kF32: {
        float v = static_cast<float>(static_cast<double>(u >> 40) * (2.0 / 16777216.0) - 1.0);
        std::memcpy(p, &v, 4);
        break;
      }
      case DType::kF64: {
        double v = static_cast<double>(u >> 11) * (2.0 / 9007199254740992.0) - 1.0;
        std::memcpy(p, &v, 8);
        break;
      }
      case DType::kI32: {
        int32_t v = static_cast<int32_t>(u % 3);
        std::memcpy(p, &v, 4);
        break;
      }
      case DType::kI64: {
        int64_t v = static_cast<int64_t>(u % 3);
        std::memcpy(p, &v, 8);
        break;
      }
      case DType::kU8: *p = static_cast<uint8_t>(u % 3); break;
      case DType::kBool: *p = static_cast<uint8_t>(u & 1); break;
    }
  }
  // A tail shorter than one element (sizes need not be multiples) is zeroed, never left undefined.
  std::memset(p, 0, bytes - count * width);
}

// ---- framing -----------------------------------------------------------------------------------

IoStatus write_preamble(int fd, uint16_t role_or_status, int timeout_ms) {
  uint8_t b[8];
  std::memcpy(b, kMagic, 4);
  b[4] = static_cast<uint8_t>(kProtocolVersion);
  b[5] = static_cast<uint8_t>(kProtocolVersion >> 8);
  b[6] = static_cast<uint8_t>(role_or_status);
  b[7] = static_cast<uint8_t>(role_or_status >> 8);
  return from_io(write_full(fd, b, sizeof b, timeout_ms), "preamble");
}

IoStatus read_preamble(int fd, uint8_t magic[4], uint16_t* version, uint16_t* role_or_status, int timeout_ms) {
  uint8_t b[8];
  IoStatus st = from_io(read_full(fd, b, sizeof b, timeout_ms), "preamble");
  if (!st.ok()) return st;
  std::memcpy(magic, b, 4);
  *version = static_cast<uint16_t>(b[4] | (b[5] << 8));
  *role_or_status = static_cast<uint16_t>(b[6] | (b[7] << 8));
  return {};
}

IoStatus read_frame(int fd, Frame* out, int idle_timeout_ms, int frame_timeout_ms, uint32_t max_bytes) {
  uint8_t first;
  IoStatus st = from_io(read_full(fd, &first, 1, idle_timeout_ms), "frame");
  if (!st.ok()) return st;
  // From here on the frame has started: a stall or a close is a truncated frame, a protocol error.
  auto truncated = [](IoStatus s) {
    if (s.kind == IoStatus::kTimeout || s.kind == IoStatus::kClosed) s = {IoStatus::kProtocol, "truncated " + s.message};
    return s;
  };
  uint8_t rest[3];
  st = truncated(from_io(read_full(fd, rest, 3, frame_timeout_ms), "frame length"));
  if (!st.ok()) return st;
  uint32_t len = first | (rest[0] << 8) | (rest[1] << 16) | (static_cast<uint32_t>(rest[2]) << 24);
  if (len == 0) return {IoStatus::kProtocol, "frame: length 0"};
  if (len > max_bytes)
    return {IoStatus::kTooLarge, "frame: length " + std::to_string(len) + " over the limit " + std::to_string(max_bytes)};
  uint8_t type;
  st = truncated(from_io(read_full(fd, &type, 1, frame_timeout_ms), "frame type"));
  if (!st.ok()) return st;
  out->type = static_cast<MsgType>(type);
  out->body.clear();
  // Grow with what arrived: each step at most doubles the bytes received so far (64 KiB to start)
  // and never reads more than kFrameChunkBytes, so memory follows the peer's bytes, not its claims.
  const size_t want = len - 1;
  const int64_t deadline = monotonic_ms() + frame_timeout_ms;
  while (out->body.size() < want) {
    size_t have = out->body.size();
    size_t step = std::min<size_t>({want - have, std::max<size_t>(have, 64u << 10), kFrameChunkBytes});
    out->body.resize(have + step);
    int left = static_cast<int>(std::max<int64_t>(0, deadline - monotonic_ms()));
    size_t got = 0;
    st = truncated(from_io(read_some(fd, out->body.data() + have, step, left, &got), "frame body"));
    out->body.resize(have + got);
    if (!st.ok()) return st;
  }
  return {};
}

IoStatus write_frame(int fd, MsgType type, const std::vector<uint8_t>& body, int timeout_ms) {
  uint32_t len = static_cast<uint32_t>(body.size() + 1);
  uint8_t head[5] = {static_cast<uint8_t>(len), static_cast<uint8_t>(len >> 8), static_cast<uint8_t>(len >> 16),
                     static_cast<uint8_t>(len >> 24), static_cast<uint8_t>(type)};
  int64_t start = monotonic_ms();
  IoStatus st = from_io(write_full(fd, head, sizeof head, timeout_ms), "frame");
  if (!st.ok() || body.empty()) return st;
  int left = timeout_ms < 0 ? -1 : static_cast<int>(timeout_ms - (monotonic_ms() - start));
  if (timeout_ms >= 0 && left < 0) left = 0;
  return from_io(write_full(fd, body.data(), body.size(), left), "frame");
}

void send_error(int fd, ErrorCode code, std::string_view message, int timeout_ms) {
  Writer w;
  w.u8(static_cast<uint8_t>(code));
  w.str(message.substr(0, kMaxStringBytes));
  (void)write_frame(fd, MsgType::kError, w.bytes(), timeout_ms);
}

}  // namespace kiln::rpc
