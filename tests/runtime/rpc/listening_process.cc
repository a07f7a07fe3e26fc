#include "tests/runtime/rpc/listening_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "runtime/rpc/net.h"
#include "runtime/rpc/rpc_client.h"

namespace kiln::rpc::test {

Process::Process(std::vector<std::string> argv, int startup_timeout_ms) {
  argv.push_back("--port");
  argv.push_back("0");
  int fds[2];
  if (pipe(fds) != 0) return;
  pid_ = fork();
  if (pid_ == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  // Read the first line ("... listening on HOST:PORT") within the startup timeout.
  std::string line;
  int64_t deadline = monotonic_ms() + startup_timeout_ms;
  char c;
  while (line.find('\n') == std::string::npos) {
    int left = static_cast<int>(std::max<int64_t>(0, deadline - monotonic_ms()));
    if (wait_readable(fds[0], left) <= 0 || read(fds[0], &c, 1) != 1) break;
    line += c;
  }
  close(fds[0]);  // later output (none expected) goes to a closed pipe; the servers never write again
  auto colon = line.rfind(':');
  if (line.find("listening on") != std::string::npos && colon != std::string::npos)
    port_ = static_cast<uint16_t>(std::atoi(line.c_str() + colon + 1));
}

Process::~Process() { kill(); }

void Process::kill() {
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

TrackerThread::TrackerThread(TrackerOptions o) {
  o.host = "127.0.0.1";
  o.port = 0;
  tracker_ = std::make_unique<Tracker>(o);
  std::string error;
  if (tracker_->listen(&error)) thread_ = std::thread([this] { tracker_->serve(); });
  else fprintf(stderr, "TrackerThread: %s\n", error.c_str());
}

TrackerThread::~TrackerThread() {
  tracker_->stop();
  if (thread_.joinable()) thread_.join();
}

bool wait_for_servers(uint16_t tracker, const std::string& key, uint32_t n, const std::string& auth_key) {
  ConnectOptions opts;
  opts.auth_key = auth_key;
  for (int i = 0; i < 300; ++i) {
    auto t = TrackerClient::connect("127.0.0.1", tracker, opts);
    if (t.ok()) {
      auto s = t->status();
      if (s.ok())
        for (const KeyStatus& k : s.value())
          if (k.key == key && k.total >= n) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace kiln::rpc::test
