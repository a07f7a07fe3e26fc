// RPCRunner: one thread per leased device, each taking the batch's next job.
#include "backends/measure/rpc_runner.h"

#include <atomic>
#include <memory>
#include <fmt/format.h>
#include <mutex>
#include <thread>

#include "frontend/ir/error.h"

namespace kiln::measure {
namespace {

// A thread's device: a lease from the tracker and a session with its server.
struct Device {
  rpc::Lease lease;
  std::optional<rpc::Session> session;
  std::map<std::string, uint32_t> uploaded;
};

}  // namespace

RpcAddress parse_rpc_address(const std::string& url) {
  const std::string scheme = "rpc://";
  if (url.rfind(scheme, 0) != 0) throw Error("runner '" + url + "': expected local or rpc://HOST:PORT/KEY");
  const std::string rest = url.substr(scheme.size());
  const size_t slash = rest.find('/');
  const size_t colon = rest.rfind(':', slash);
  if (slash == std::string::npos || slash + 1 == rest.size())
    throw Error("runner '" + url + "': missing the device KEY (rpc://HOST:PORT/KEY)");
  if (colon == std::string::npos || colon == 0) throw Error("runner '" + url + "': missing HOST:PORT");
  RpcAddress a;
  a.host = rest.substr(0, colon);
  a.key = rest.substr(slash + 1);
  const std::string port = rest.substr(colon + 1, slash - colon - 1);
  int p = 0;
  try {
    size_t used = 0;
    p = std::stoi(port, &used);
    if (used != port.size()) p = -1;
  } catch (const std::exception&) {
    p = -1;
  }
  if (p <= 0 || p > 65535) throw Error("runner '" + url + "': bad port '" + port + "'");
  a.port = static_cast<uint16_t>(p);
  return a;
}

RPCRunner::RPCRunner(RpcAddress address, Builder& reference_builder, RpcRunnerOptions options)
    : DeviceRunner(reference_builder, options.run), address_(std::move(address)), rpc_(std::move(options)) {}

std::vector<DeviceJobResult> RPCRunner::run_jobs(const std::vector<DeviceJob>& jobs) {
  std::vector<DeviceJobResult> out(jobs.size());
  std::vector<char> done(jobs.size(), 0);  // not vector<bool>: threads write neighbours
  std::atomic<size_t> next{0};
  std::mutex why_mutex;
  std::string last_device_error = "no device of key '" + address_.key + "' could be leased";

  auto worker = [&] {
    auto note = [&](const std::string& why) {
      std::lock_guard<std::mutex> lock(why_mutex);
      last_device_error = why;
    };
    rpc::Expected<rpc::TrackerClient> tracker = rpc::TrackerClient::connect(address_.host, address_.port, rpc_.connect);
    if (!tracker.ok()) return note(fmt::format("tracker {}:{}: {}", address_.host, address_.port, tracker.error().message));
    std::unique_ptr<Device> device;  // not optional: GCC 12 warns maybe-uninitialized on it
    int failures = 0;
    auto drop_device = [&] {
      if (!device) return;
      if (device->session) device->session->close();
      tracker->release(device->lease);
      device.reset();
    };
    // Gets a working device before a job is taken, so a thread without one never holds a job.
    auto acquire = [&]() -> bool {
      while (!device) {
        if (failures >= rpc_.max_device_failures) return false;
        rpc::Expected<rpc::Lease> lease =
            tracker->request(address_.key, rpc_.priority, static_cast<int>(rpc_.request_timeout_s * 1000));
        if (!lease.ok()) {
          note("no device of key '" + address_.key + "': " + lease.error().message);
          return false;
        }
        rpc::Expected<rpc::Session> s = rpc::Session::connect(lease->host, lease->port, rpc_.connect);
        if (!s.ok()) {
          ++failures;
          note(fmt::format("device {}:{}: {}", lease->host, lease->port, s.error().message));
          tracker->release(lease.value());
          continue;
        }
        device = std::make_unique<Device>();
        device->lease = lease.value();
        device->session.emplace(std::move(s.value()));
      }
      return true;
    };
    while (next.load() < jobs.size()) {
      if (!acquire()) break;
      const size_t j = next.fetch_add(1);
      if (j >= jobs.size()) break;
      out[j] = run_job_on_session(*device->session, device->uploaded, jobs[j]);
      done[j] = true;
      const rpc::RunError e = out[j].run.error;
      if (e == rpc::RunError::kConnection || e == rpc::RunError::kSessionTimeout || e == rpc::RunError::kRejected ||
          !device->session->is_open()) {
        out[j].run.message = fmt::format("device {}:{}: {}", device->lease.host, device->lease.port, out[j].run.message);
        ++failures;
        drop_device();
      }
    }
    drop_device();
  };

  const size_t n_threads = std::min<size_t>(static_cast<size_t>(std::max(rpc_.n_parallel, 1)), jobs.size());
  std::vector<std::thread> threads;
  for (size_t t = 0; t < n_threads; ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (done[j]) continue;
    out[j].run.error = rpc::RunError::kConnection;
    out[j].run.message = last_device_error;
  }
  return out;
}

}  // namespace kiln::measure
