// Test helpers: kernels compiled with the system compiler, child processes, expected outputs.
#include "tests/runtime/rpc/rpc_test_util.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "runtime/rpc/net.h"

namespace kiln::rpc::test {

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "kiln-rpc-test-XXXXXX").string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data())) path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

std::string kernel_source() {
  return R"(
#define N )" + std::to_string(kElements) + R"(
void scale2(void** b, void* parallel) {
  (void)parallel;
  const float* x = (const float*)b[0];
  float* y = (float*)b[1];
  for (int i = 0; i < N; ++i) y[i] = 2.0f * x[i];
}
void segv(void** b, void* parallel) {
  (void)b; (void)parallel;
  *(volatile int*)0 = 1;
}
void spin(void** b, void* parallel) {
  (void)b; (void)parallel;
  for (volatile unsigned long i = 0;; ++i) {}
}
#include <time.h>
/* Busy for 20 ms a call. */
void slow20ms(void** b, void* parallel) {
  (void)b; (void)parallel;
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do clock_gettime(CLOCK_MONOTONIC, &t);
  while ((t.tv_sec - t0.tv_sec) * 1e3 + (t.tv_nsec - t0.tv_nsec) * 1e-6 < 20);
}
/* y = 2x through the parallel_for hook when there is one (kiln's { parallel_for, user } pair); y[0]
   then also says whether it came. */
struct hook { void (*parallel_for)(void*, long, void (*)(void*, long), void*); void* user; };
struct job { const float* x; float* y; };
static void body(void* c, long i) { struct job* j = (struct job*)c; j->y[i] = 2.0f * j->x[i]; }
void scale2_parallel(void** b, void* parallel) {
  struct job j = {(const float*)b[0], (float*)b[1]};
  const struct hook* h = (const struct hook*)parallel;
  if (h) h->parallel_for(h->user, N, body, &j);
  else for (long i = 0; i < N; ++i) body(&j, i);
  j.y[0] = h ? 1.0f : 0.0f;
}
void garbage(void** b, void* parallel) {
  (void)parallel;
  const float* x = (const float*)b[0];
  float* y = (float*)b[1];
  for (int i = 0; i < N; ++i) y[i] = x[i] + 1.0f;
}
)";
}

std::string build_kernels(const std::string& compiler, const std::string& dir, const std::string& name) {
  std::string src = dir + "/" + name + ".c", so = dir + "/" + name + ".so";
  std::ofstream(src) << kernel_source();
  std::string cmd = compiler + " -shared -fPIC -O1 -o " + so + " " + src + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    fprintf(stderr, "rpc test: '%s' failed\n", cmd.c_str());
    return "";
  }
  return so;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string host_server_binary() { return KILN_RPC_SERVER; }
std::string aarch64_server_binary() { return KILN_RPC_SERVER_AARCH64; }

std::vector<std::string> qemu_prefix() { return {KILN_QEMU_AARCH64, "-L", "/usr/aarch64-linux-gnu"}; }

std::string aarch64_missing() {
  if (std::string(KILN_RPC_SERVER_AARCH64).empty() || access(KILN_RPC_SERVER_AARCH64, X_OK) != 0)
    return "no AArch64 kiln-rpc-server (aarch64-linux-gnu-g++ missing at configure time)";
  if (std::string(KILN_AARCH64_CC).empty()) return "aarch64-linux-gnu-gcc not found";
  if (std::string(KILN_QEMU_AARCH64).empty()) return "qemu-aarch64 not found";
  return "";
}

RunRequest unary_request(uint32_t module, const std::string& func, uint64_t seed) {
  RunRequest r;
  r.module = module;
  r.func = func;
  r.seed = seed;
  r.number = 1;
  r.repeat = 3;
  r.min_repeat_ms = 1;
  r.run_timeout_ms = 10000;
  r.buffers = {{kElements * 4, DType::kF32, true, false}, {kElements * 4, DType::kF32, false, true}};
  return r;
}

std::vector<uint8_t> expected_scale2(uint64_t seed) {
  std::vector<float> x(kElements), y(kElements);
  fill_random(x.data(), x.size() * 4, DType::kF32, seed, 0);
  for (int i = 0; i < kElements; ++i) y[i] = 2.0f * x[i];
  std::vector<uint8_t> out(y.size() * 4);
  std::memcpy(out.data(), y.data(), out.size());
  return out;
}

Fd raw_session(uint16_t port, Role role, const std::string& auth_key) {
  ConnectOptions opts;
  opts.auth_key = auth_key;
  auto fd = connect_authenticated("127.0.0.1", port, role, opts, nullptr);
  EXPECT_TRUE(fd.ok()) << fd.error().message;
  return fd.ok() ? std::move(fd.value()) : Fd();
}

void expect_good_session(uint16_t port, const std::string& so_path, const std::string& auth_key) {
  ConnectOptions opts;
  opts.auth_key = auth_key;
  auto s = Session::connect("127.0.0.1", port, opts);
  ASSERT_TRUE(s.ok()) << s.error().message;
  expect_good_session(s.value(), so_path);
}

void expect_good_session(Session& s, const std::string& so_path) {
  auto m = s.upload("scale2.so", read_bytes(so_path));
  ASSERT_TRUE(m.ok()) << m.error().message;
  RunResult r = s.run(unary_request(m.value(), "scale2", 42));
  ASSERT_EQ(r.error, RunError::kNone) << r.message;
  EXPECT_EQ(r.outputs[1], expected_scale2(42));
  ASSERT_EQ(r.costs.size(), 3u);
  for (double c : r.costs) EXPECT_GT(c, 0.0);
}

}  // namespace kiln::rpc::test
