/// \file Helpers shared by the RPC tests: test kernels compiled at test time, server processes started
/// on a free port, and the inputs/outputs the y = 2x kernel should produce.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/rpc/rpc_client.h"
#include "tests/runtime/rpc/listening_process.h"

namespace kiln::rpc::test {

/// A scratch directory removed (recursively) at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Elements of the test kernels' buffers (compiled in as N).
inline constexpr int kElements = 1024;

/// Test kernels, all `void NAME(void** buffers, void* parallel)` over kElements floats:
/// scale2 (y = 2x), segv (null store), spin (loops forever), garbage (y = x + 1: runs fine, wrong).
std::string kernel_source();

/// Compiles kernel_source() with `compiler` into dir/name.so; returns the path or "" (with a message on
/// stderr) when the compiler is missing or fails.
std::string build_kernels(const std::string& compiler, const std::string& dir, const std::string& name);

/// Reads a whole file.
std::vector<uint8_t> read_bytes(const std::string& path);


/// Path of the host kiln-rpc-server and, when it was built, the AArch64 one ("" otherwise).
std::string host_server_binary();
std::string aarch64_server_binary();
/// Why the AArch64 pieces cannot run here ("" when they can): no cross server, no cross gcc, no QEMU.
std::string aarch64_missing();
/// argv prefix that runs an AArch64 binary here: {qemu-aarch64, -L, /usr/aarch64-linux-gnu}.
std::vector<std::string> qemu_prefix();

/// A RunRequest for scale2-like kernels: buffer 0 input x, buffer 1 output y, kElements floats each.
RunRequest unary_request(uint32_t module, const std::string& func, uint64_t seed);
/// What scale2 must return for `seed`: 2 * fill_random(x).
std::vector<uint8_t> expected_scale2(uint64_t seed);

/// Connects, uploads scale2 from `so_path`, runs it, and checks outputs and costs; gtest failures
/// otherwise. The "server still answers a good session" half of every fault test.
void expect_good_session(uint16_t port, const std::string& so_path, const std::string& auth_key = "");
/// The same checks on a session already connected.
void expect_good_session(Session& s, const std::string& so_path);

/// An authenticated raw connection (preamble, CHALLENGE, HELLO, WELCOME done) for tests that then speak
/// frames by hand; invalid (with a gtest failure) when the handshake fails.
Fd raw_session(uint16_t port, Role role = Role::kClient, const std::string& auth_key = "");

}  // namespace kiln::rpc::test
