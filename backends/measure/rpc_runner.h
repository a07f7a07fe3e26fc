/// \file RPCRunner: measures candidates on device servers lent by a tracker (`rpc://HOST:PORT/KEY`).
///
/// It leases up to n_parallel devices of the key at once; each lease has its own thread and session and
/// takes the next candidate of the batch when free, so a batch spreads over the boards in the pool.
/// A device that dies mid-batch costs the candidate that was on it (RuntimeDevice, or RunTimeout when
/// the server said so); its thread releases the lease and asks the tracker for another device, and the
/// other threads carry on. Candidates left when no device can be had get RuntimeDevice errors.
#pragma once
#include <cstdint>
#include <string>

#include "backends/measure/device_runner.h"

namespace kiln::measure {

/// Where the devices are: a tracker and a device key.
struct RpcAddress {
  std::string host;
  uint16_t port = 0;
  std::string key;
};

/// Parses "rpc://HOST:PORT/KEY"; throws kiln::Error naming the part that is missing or malformed.
RpcAddress parse_rpc_address(const std::string& url);

struct RpcRunnerOptions {
  RunnerOptions run;
  int n_parallel = 1;             ///< devices leased at once
  int32_t priority = 0;           ///< of lease requests at the tracker
  double request_timeout_s = 30;  ///< wait for a free device before giving up on it
  int max_device_failures = 3;    ///< per thread: lost devices (failed connects) before it stops asking
  rpc::ConnectOptions connect;    ///< auth key and I/O timeouts for the tracker and the servers
};

class RPCRunner : public DeviceRunner {
 public:
  RPCRunner(RpcAddress address, Builder& reference_builder, RpcRunnerOptions options = {});

 protected:
  std::vector<DeviceJobResult> run_jobs(const std::vector<DeviceJob>& jobs) override;

 private:
  RpcAddress address_;
  RpcRunnerOptions rpc_;
};

}  // namespace kiln::measure
