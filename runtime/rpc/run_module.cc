// The child-process runner. The parent only forks, reads one length-prefixed RunOutcome from a pipe
// and reaps the child; everything that can crash (dlopen, the kernel) happens in the child.
#include "runtime/rpc/run_module.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "runtime/kiln_parallel_pthread.h"
#include "runtime/rpc/net.h"

namespace kiln::rpc {

namespace {

using KernelFn = void (*)(void**, void*);
// A CUDA candidate's timing entry (runtime/cuda/kiln_cuda_measure.c): host buffers, their bytes and
// roles (0 input, 1 output, 2 temporary), number, repeat, min_repeat_ms, slow_call_s; costs out.
using GpuMeasureFn = int (*)(void**, const unsigned long long*, const unsigned char*, int, unsigned, unsigned, unsigned,
                             double, double*, int*, char*, int);

constexpr size_t kCacheLine = 64;

double now_seconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Evicts every line of a buffer from all cache levels, so a repeat starts cold (as it would inside a
// model whose other layers evicted this one's data).
void flush_from_caches(const void* data, size_t bytes) {
  auto* p = static_cast<const char*>(data);
#if defined(__x86_64__) || defined(__i386__)
  for (size_t off = 0; off < bytes; off += kCacheLine) asm volatile("clflush (%0)" ::"r"(p + off) : "memory");
  asm volatile("mfence" ::: "memory");
#elif defined(__aarch64__)
  for (size_t off = 0; off < bytes; off += kCacheLine) asm volatile("dc civac, %0" ::"r"(p + off) : "memory");
  asm volatile("dsb ish" ::: "memory");
#else
  (void)p;
  (void)bytes;
#endif
}

struct FreeDeleter {
  void operator()(void* p) const { free(p); }
};

void run_on_cpu(KernelFn fn, const RunSpec& spec, std::vector<void*>& args, RunOutcome& out);

// Runs inside the child; returns the outcome to send to the parent.
RunOutcome run_here(const std::string& so_path, const RunSpec& spec) {
  RunOutcome out;
  out.status = RunStatus::kRuntimeDevice;
  void* handle = dlopen(so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    out.message = std::string("dlopen: ") + (e ? e : "unknown error");
    return out;
  }
  // A CUDA candidate exports <func>_gpu_measure instead of the kernel itself.
  auto gpu = reinterpret_cast<GpuMeasureFn>(dlsym(handle, (spec.func + "_gpu_measure").c_str()));
  auto fn = reinterpret_cast<KernelFn>(dlsym(handle, spec.func.c_str()));
  if (!fn && !gpu) {
    out.message = "dlsym: no function '" + spec.func + "' in the module";
    return out;
  }
  std::vector<std::unique_ptr<void, FreeDeleter>> storage;
  std::vector<void*> args;
  for (size_t i = 0; i < spec.buffers.size(); ++i) {
    const BufferSpec& b = spec.buffers[i];
    void* mem = nullptr;
    size_t rounded = (b.bytes + kCacheLine - 1) / kCacheLine * kCacheLine;
    if (posix_memalign(&mem, kCacheLine, rounded ? rounded : kCacheLine) != 0) {
      out.message = "out of memory allocating buffer " + std::to_string(i);
      return out;
    }
    storage.emplace_back(mem);
    memset(mem, 0, rounded);
    if (b.input) fill_random(mem, b.bytes, b.dtype, spec.seed, static_cast<uint32_t>(i));
    args.push_back(mem);
  }

  if (gpu) {
    std::vector<unsigned long long> bytes;
    std::vector<unsigned char> roles;
    for (const BufferSpec& b : spec.buffers) {
      bytes.push_back(b.bytes);
      roles.push_back(b.input ? 0 : b.output ? 1 : 2);
    }
    std::vector<double> costs(spec.repeat + 1);
    int ncosts = 0;
    char err[512] = {0};
    const int rc = gpu(args.data(), bytes.data(), roles.data(), static_cast<int>(args.size()), spec.number, spec.repeat,
                       spec.min_repeat_ms, spec.slow_call_ms / 1000.0, costs.data(), &ncosts, err, sizeof err);
    if (rc != 0) {
      out.message = std::string("GPU: ") + err;
      return out;
    }
    out.costs.assign(costs.begin(), costs.begin() + std::clamp(ncosts, 0, static_cast<int>(costs.size())));
  } else {
    run_on_cpu(fn, spec, args, out);
  }
  for (size_t i = 0; i < spec.buffers.size(); ++i) {
    if (!spec.buffers[i].output) continue;
    auto* p = static_cast<const uint8_t*>(args[i]);
    out.outputs.emplace_back(static_cast<uint16_t>(i), std::vector<uint8_t>(p, p + spec.buffers[i].bytes));
  }
  out.status = out.message.empty() ? RunStatus::kNone : RunStatus::kRuntimeDevice;
  return out;
}

// Times `fn` on the CPU: one untimed call, then the repeats (run_in_child's comment).
void run_on_cpu(KernelFn fn, const RunSpec& spec, std::vector<void*>& args, RunOutcome& out) {
  // The { parallel_for, user } pair generated kernels take (backends/llvm/codegen.h). The pool lives as
  // long as this child, which exits after the run.
  struct ParallelHook {
    void (*parallel_for)(void*, int64_t, void (*)(void*, int64_t), void*);
    void* user;
  } hook{kiln_pthread_parallel_for, nullptr};
  void* parallel = nullptr;
  if (spec.threads > 1) {
    hook.user = kiln_pthread_pool_create(spec.threads);
    if (!hook.user) {
      out.message = "cannot start " + std::to_string(spec.threads) + " threads";
      return;
    }
    parallel = &hook;
  }

  const double first_start = now_seconds();
  fn(args.data(), parallel);  // untimed: page faults, lazy binding, cold instruction cache
  const double first_call = now_seconds() - first_start;
  // A candidate far slower than the best known one is not worth its repeats: its first call is its time.
  const bool too_slow = spec.slow_call_ms > 0 && first_call * 1000.0 > spec.slow_call_ms;
  if (too_slow) out.costs.push_back(first_call);
  uint64_t number = spec.number;
  double target = spec.min_repeat_ms / 1000.0;
  for (uint32_t r = 0; r < spec.repeat && !too_slow; ++r) {
    for (;;) {
      if (spec.cache_flush)
        for (size_t i = 0; i < args.size(); ++i) flush_from_caches(args[i], spec.buffers[i].bytes);
      double t0 = now_seconds();
      for (uint64_t k = 0; k < number; ++k) fn(args.data(), parallel);
      double elapsed = now_seconds() - t0;
      if (elapsed >= target || number >= kMaxNumber) {
        out.costs.push_back(elapsed / static_cast<double>(number));
        break;
      }
      // Too short to time reliably: aim past min_repeat_ms with a margin, at least doubling.
      double want = elapsed > 0 ? std::ceil(static_cast<double>(number) * target / elapsed * 1.2) : 0.0;
      uint64_t next = std::max<uint64_t>(number * 2, want > 1e12 ? kMaxNumber : static_cast<uint64_t>(want));
      number = std::min<uint64_t>(next, kMaxNumber);
    }
  }
}

[[noreturn]] void child_main(int wfd, const std::string& so_path, const RunSpec& spec) {
  // Keep only stdio and the result pipe: a hung child must not hold other sessions' sockets open.
  if (wfd != 3) {
    dup2(wfd, 3);
    wfd = 3;
  }
  close_range(4, ~0u, 0);
  // If the server dies, so does the candidate (instead of running on as an orphan).
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  RunOutcome out = run_here(so_path, spec);
  Writer w;
  w.u32(0);
  encode_run_outcome(w, out);
  uint32_t len = static_cast<uint32_t>(w.bytes().size() - 4);
  for (int i = 0; i < 4; ++i) w.bytes()[i] = static_cast<uint8_t>(len >> (8 * i));
  write_full(wfd, w.bytes().data(), w.bytes().size(), -1);
  _exit(0);
}

std::string describe_exit(int wstatus) {
  if (WIFSIGNALED(wstatus)) {
    int sig = WTERMSIG(wstatus);
    const char* name = sigabbrev_np(sig);
    return std::string("candidate killed by signal ") + std::to_string(sig) + " (SIG" + (name ? name : "?") + ")";
  }
  if (WIFEXITED(wstatus)) return "candidate process exited with code " + std::to_string(WEXITSTATUS(wstatus));
  return "candidate process ended abnormally";
}

}  // namespace

RunOutcome run_in_child(const std::string& so_path, const RunSpec& spec) {
  RunOutcome out;
  out.status = RunStatus::kRuntimeDevice;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    out.message = std::string("pipe: ") + strerror(errno);
    return out;
  }
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    out.message = std::string("fork: ") + strerror(errno);
    return out;
  }
  if (pid == 0) {
    close(fds[0]);
    child_main(fds[1], so_path, spec);
  }
  close(fds[1]);
  Fd rfd(fds[0]);

  int64_t deadline = monotonic_ms() + spec.run_timeout_ms;
  auto left = [&] { return static_cast<int>(std::max<int64_t>(0, deadline - monotonic_ms())); };
  uint8_t head[4];
  IoResult io = read_full(rfd.get(), head, 4, left());
  std::vector<uint8_t> body;
  if (io == IoResult::kOk) {
    uint32_t len = head[0] | (head[1] << 8) | (head[2] << 16) | (static_cast<uint32_t>(head[3]) << 24);
    if (len > kMaxOutputBytes + (1u << 20)) {
      io = IoResult::kError;
    } else {
      body.resize(len);
      io = read_full(rfd.get(), body.data(), len, left());
    }
  }
  if (io == IoResult::kTimeout) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    out.status = RunStatus::kRunTimeout;
    out.message = "run did not finish within " + std::to_string(spec.run_timeout_ms) + " ms; killed";
    return out;
  }
  int wstatus = 0;
  if (io != IoResult::kOk) {
    // The child died before sending its result (a crash), or sent nonsense: kill to be sure, then ask how.
    kill(pid, SIGKILL);
    waitpid(pid, &wstatus, 0);
    out.message = describe_exit(wstatus);
    return out;
  }
  waitpid(pid, &wstatus, 0);
  Reader r(body);
  if (!decode_run_outcome(r, &out)) {
    out = RunOutcome{};
    out.status = RunStatus::kRuntimeDevice;
    out.message = "candidate process sent a malformed result";
  }
  return out;
}

}  // namespace kiln::rpc
