// LocalRunner: child processes on this machine, or the target's server under its emulator.
#include "backends/measure/local_runner.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <sstream>

#include "runtime/rpc/auth_key.h"
#include "runtime/rpc/run_module.h"

namespace kiln::measure {
namespace {

namespace fs = std::filesystem;

// The default place of the cross-compiled server: <dir of this executable>/aarch64/kiln-rpc-server.
std::string default_cross_server() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  return (self.parent_path() / "aarch64" / "kiln-rpc-server").string();
}

DeviceJobResult run_here(const DeviceJob& job) {
  const auto start = std::chrono::steady_clock::now();
  DeviceJobResult r;
  rpc::RunOutcome o = rpc::run_in_child(job.so_path, job.spec);
  r.run.error = o.status == rpc::RunStatus::kNone          ? rpc::RunError::kNone
                : o.status == rpc::RunStatus::kRunTimeout ? rpc::RunError::kRunTimeout
                                                          : rpc::RunError::kRuntimeDevice;
  r.run.message = std::move(o.message);
  r.run.costs = std::move(o.costs);
  r.run.outputs.resize(job.spec.buffers.size());
  for (auto& [index, bytes] : o.outputs)
    if (index < r.run.outputs.size()) r.run.outputs[index] = std::move(bytes);
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace

LocalRunner::LocalRunner(Target target, Builder& reference_builder, LocalRunnerOptions options)
    : DeviceRunner(reference_builder, options.run), target_(std::move(target)), local_(std::move(options)) {
  if (local_.cross_server.empty()) local_.cross_server = default_cross_server();
}

LocalRunner::~LocalRunner() { stop_emulated_server(); }

void LocalRunner::stop_emulated_server() {
  session_.reset();
  uploaded_.clear();
  if (server_pid_ > 0) {
    ::kill(server_pid_, SIGKILL);
    waitpid(server_pid_, nullptr, 0);
    server_pid_ = -1;
  }
}

std::string LocalRunner::ensure_emulated_server() {
  if (session_ && session_->is_open()) return "";
  stop_emulated_server();
  if (access(local_.cross_server.c_str(), X_OK) != 0)
    return "no kiln-rpc-server for target " + target_.name + " at '" + local_.cross_server + "'";
  std::vector<std::string> argv;
  std::istringstream words(target_.run_prefix);
  for (std::string w; words >> w;) argv.push_back(w);
  for (const char* a : {"--host", "127.0.0.1", "--port", "0"}) argv.emplace_back(a);
  argv.insert(argv.end() - 4, local_.cross_server);
  int fds[2];
  if (pipe(fds) != 0) return "pipe failed";
  server_pid_ = fork();
  if (server_pid_ < 0) return "fork failed";
  if (server_pid_ == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> args;
    for (std::string& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  // The server prints "kiln-rpc-server (ARCH) listening on HOST:PORT" once it is bound.
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  char c;
  while (line.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fds[0], POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0 || read(fds[0], &c, 1) != 1) break;
    line += c;
  }
  close(fds[0]);  // the server writes nothing more unless verbose
  const size_t colon = line.rfind(':');
  if (line.find("listening on") == std::string::npos || colon == std::string::npos) {
    stop_emulated_server();
    return "'" + target_.run_prefix + " " + local_.cross_server + "' did not start";
  }
  server_port_ = static_cast<uint16_t>(std::atoi(line.c_str() + colon + 1));
  // The server inherited this process's environment, so it loaded $KILN_RPC_AUTH_KEY if that is set:
  // prove the same key (none when it is unset).
  rpc::ConnectOptions connect;
  std::string key_error;
  (void)rpc::load_auth_key("", &connect.auth_key, &key_error);
  rpc::Expected<rpc::Session> s = rpc::Session::connect("127.0.0.1", server_port_, connect);
  if (!s.ok()) {
    stop_emulated_server();
    return "cannot connect to the emulated server: " + s.error().message;
  }
  session_ = std::make_unique<rpc::Session>(std::move(s.value()));
  return "";
}

std::vector<DeviceJobResult> LocalRunner::run_jobs(const std::vector<DeviceJob>& jobs) {
  std::vector<DeviceJobResult> out;
  out.reserve(jobs.size());
  for (const DeviceJob& job : jobs) {
    if (target_.runs_natively()) {
      out.push_back(run_here(job));
      continue;
    }
    if (std::string why = ensure_emulated_server(); !why.empty()) {
      DeviceJobResult r;
      r.run.error = rpc::RunError::kConnection;
      r.run.message = why;
      out.push_back(std::move(r));
      continue;
    }
    out.push_back(run_job_on_session(*session_, uploaded_, job));
  }
  return out;
}

}  // namespace kiln::measure
