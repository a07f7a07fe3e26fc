/// \file LocalRunner: measures candidates on this machine, one at a time (so they do not share cores
/// and caches while being timed), each in a forked child (runtime/rpc/run_module.h) so a crash or hang
/// costs one error result.
///
/// A target that does not run natively (its run_prefix is e.g. `qemu-aarch64 -L ...`) cannot be
/// dlopen'ed here. For those the runner starts the target's own kiln-rpc-server under the run prefix on
/// a free loopback port and measures through an RPC session with it: the same server code a board runs,
/// so there is no second emulation path to keep working. Times under an emulator are only good for
/// checking that programs run and compute the right thing.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <sys/types.h>

#include "backends/measure/device_runner.h"
#include "targets/target.h"

namespace kiln::measure {

struct LocalRunnerOptions {
  RunnerOptions run;
  /// The kiln-rpc-server built for the target, for targets with a run prefix. Empty: `aarch64/kiln-rpc-
  /// server` beside this executable (where the build puts the cross-compiled one).
  std::string cross_server;
};

class LocalRunner : public DeviceRunner {
 public:
  LocalRunner(Target target, Builder& reference_builder, LocalRunnerOptions options = {});
  ~LocalRunner() override;

 protected:
  std::vector<DeviceJobResult> run_jobs(const std::vector<DeviceJob>& jobs) override;

 private:
  // Starts (or restarts, after it died) the emulated server and connects to it; "" on success.
  std::string ensure_emulated_server();
  void stop_emulated_server();
  Target target_;
  LocalRunnerOptions local_;
  pid_t server_pid_ = -1;
  uint16_t server_port_ = 0;
  std::unique_ptr<rpc::Session> session_;
  std::map<std::string, uint32_t> uploaded_;
};

}  // namespace kiln::measure
