// libFuzzer target for what a peer of an RPC server or tracker controls before and after the handshake:
// the bytes arriving on a socket. They go into one end of a socketpair; the other end reads a preamble
// and then frames as the server does (read_frame with its size limit), and every frame body is decoded
// as each message the protocol has (RunSpec with its validation, ServerInfo, RunOutcome, tracker status)
// and checked as an upload name. Any bytes must end in a clean failure, never in a crash, a hang, a
// leak or an allocation the bytes that arrived do not justify.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/rpc/protocol.h"

using namespace kiln::rpc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 16)) return 0;  // fits a socketpair's buffer, so one write never blocks
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 0;
  if (size > 0 && write(fds[1], data, size) != static_cast<ssize_t>(size)) {
    close(fds[0]);
    close(fds[1]);
    return 0;
  }
  shutdown(fds[1], SHUT_WR);  // the peer is done: every read past the bytes sees the close
  uint8_t magic[4];
  uint16_t version = 0, role = 0;
  if (read_preamble(fds[0], magic, &version, &role, 50).ok()) {
    Frame f;
    while (read_frame(fds[0], &f, 50, 50, 1u << 20).ok()) {
      RunSpec spec;
      std::string why;
      bool too_large = false;
      Reader a(f.body);
      decode_run_spec(a, &spec, &why, &too_large);
      ServerInfo info;
      Reader b(f.body);
      decode_server_info(b, &info);
      RunOutcome outcome;
      Reader c(f.body);
      decode_run_outcome(c, &outcome);
      std::vector<KeyStatus> status;
      Reader d(f.body);
      decode_status(d, &status);
      is_valid_upload_name(std::string_view(reinterpret_cast<const char*>(f.body.data()), f.body.size()));
    }
  }
  close(fds[0]);
  close(fds[1]);
  return 0;
}
