// `--runner` and the timing options -> a local or RPC runner.
#include "toolchain/runner_choice.h"

#include "backends/measure/local_runner.h"
#include "backends/measure/rpc_runner.h"
#include "frontend/ir/error.h"
#include "runtime/rpc/auth_key.h"

namespace kiln {

void RunnerArgs::add_to(CLI::App* app, const std::string& seed_flag) {
  app->add_option("--runner", runner, "local, or rpc://HOST:PORT/KEY (a tracker and a device key)")
      ->capture_default_str();
  app->add_option("--number", number, "Calls per repeat (grown to --min-repeat-ms)")->capture_default_str();
  app->add_option("--repeat", repeat, "Timed repeats")->capture_default_str();
  app->add_option("--min-repeat-ms", min_repeat_ms, "Shortest repeat")->capture_default_str();
  app->add_flag("--cache-flush", cache_flush, "Flush the buffers from the caches before each repeat");
  app->add_option("--timeout", timeout_s, "Run time limit per schedule, seconds")->capture_default_str();
  app->add_option(seed_flag, seed, "Seed of the random inputs")->capture_default_str();
  app->add_option("--parallel", parallel, "rpc: devices leased at once")->capture_default_str();
  app->add_option("--auth-key-file", auth_key_file,
                  "rpc: file holding the auth key of the tracker and servers (default: $KILN_RPC_AUTH_KEY)");
}

std::unique_ptr<measure::ProgramRunner> RunnerArgs::make(const Target& target, measure::Builder& reference_builder,
                                                         int threads) const {
  measure::RunnerOptions ro;
  ro.number = number;
  ro.repeat = repeat;
  ro.min_repeat_ms = min_repeat_ms;
  ro.cache_flush = cache_flush;
  ro.timeout_s = timeout_s;
  ro.seed = seed;
  ro.threads = threads;
  if (runner == "local") {
    measure::LocalRunnerOptions lo;
    lo.run = ro;
    return std::make_unique<measure::LocalRunner>(target, reference_builder, lo);
  }
  measure::RpcRunnerOptions rpc;
  rpc.run = ro;
  rpc.n_parallel = parallel;
  std::string error;
  if (!rpc::load_auth_key(auth_key_file, &rpc.connect.auth_key, &error)) throw Error("--runner " + runner + ": " + error);
  return std::make_unique<measure::RPCRunner>(measure::parse_rpc_address(runner), reference_builder, rpc);
}

}  // namespace kiln
