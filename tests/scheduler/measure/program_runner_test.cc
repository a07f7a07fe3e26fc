// The runners: a local batch of random matmul+relu programs measured and checked against the default
// schedule, a hand-made wrong program caught as WrongAnswer, a batch spread by a loopback tracker over
// two x86-64 servers (plus an AArch64 one under QEMU when it is here), and a server killed mid-batch
// costing only its own candidates.
#include <gtest/gtest.h>

#include "tests/runtime/rpc/listening_process.h"
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <thread>

#include "backends/measure/local_runner.h"
#include "backends/measure/program_builder.h"
#include "backends/measure/rpc_runner.h"
#include "frontend/partition/partition.h"
#include "scheduler/sketch/random_program.h"
#include "scheduler/sketch/sketch_rule.h"
#include "scheduler/tasks/task.h"
#include "tests/backends/measure/measure_tasks.h"
#include "tests/frontend/test_models.h"
#include "toolchain/pipeline.h"

namespace kiln::measure {
namespace {

namespace fs = std::filesystem;

using testing::matmul_relu_task;

std::vector<MeasureInput> random_inputs(const Task& task, int n, const Target& target, uint64_t seed) {
  auto dag = std::make_shared<const te::ComputeDAG>(task.dag);
  sketch::SearchParams p;
  p.cores = std::max(target.cores, 1);
  p.vector_lanes = target.vector_lanes(4);
  std::vector<state::State> sketches = sketch::generate_sketches(state::State(dag), p);
  sketch::Rng rng(seed);
  std::vector<MeasureInput> out;
  for (int i = 0; i < n; ++i) out.push_back({task.key, dag, sketch::sample_program(sketches, p, rng)});
  return out;
}

BuilderOptions quick_builds() {
  BuilderOptions o;
  o.timeout_s = 8;
  return o;
}

// Candidates that built, with their builds.
void keep_built(std::vector<MeasureInput>& inputs, std::vector<BuildResult>& builds) {
  std::vector<MeasureInput> in;
  std::vector<BuildResult> b;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (builds[i].error == MeasureError::None) in.push_back(inputs[i]), b.push_back(builds[i]);
  inputs = std::move(in);
  builds = std::move(b);
}

TEST(CompareOutput, TolerancesNanAndIntegers) {
  auto bytes = [](std::vector<float> v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(compare_output("y", DType::Float32, bytes({1.0f, nan, 0.0f}), bytes({1.0005f, nan, 5e-5f})), "");
  EXPECT_NE(compare_output("y", DType::Float32, bytes({1.0f, 2.0f}), bytes({1.0f, 2.01f})).find("element 1"),
            std::string::npos);
  EXPECT_NE(compare_output("y", DType::Float32, bytes({nan}), bytes({1.0f})), "");
  EXPECT_NE(compare_output("y", DType::Float32, bytes({1.0f}), bytes({1.0f, 1.0f})), "");
  EXPECT_NE(compare_output("i", DType::Int64, {1, 0, 0, 0, 0, 0, 0, 0}, {2, 0, 0, 0, 0, 0, 0, 0}), "");
  EXPECT_EQ(compare_output("i", DType::Int64, {1, 0, 0, 0, 0, 0, 0, 0}, {1, 0, 0, 0, 0, 0, 0, 0}), "");
}

// A long reduction of large terms that cancels to near zero at one element: the rounding of two
// summation orders differs there by what it does at every element (the resnet3d18 candidates once
// rejected: 0.00729 vs 0.00716 in an output of values around 14). The output's scale decides; an
// element moved by anything like that scale is still wrong.
TEST(CompareOutput, ToleranceScalesWithTheOutputNotTheElement) {
  auto bytes = [](std::vector<float> v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  };
  const std::vector<float> large{14.0f, -13.0f, 15.0f, 0.00716f};
  std::vector<float> rounded = large;
  rounded[3] = 0.00729f;
  EXPECT_EQ(compare_output("y", DType::Float32, bytes(rounded), bytes(large)), "");
  std::vector<float> wrong = large;
  wrong[3] = 0.5f;
  EXPECT_NE(compare_output("y", DType::Float32, bytes(wrong), bytes(large)).find("element 3"), std::string::npos);
  // Without the large values the same difference is beyond rounding.
  EXPECT_NE(compare_output("y", DType::Float32, bytes({0.01f, 0.00729f}), bytes({0.01f, 0.00716f})), "");
}

TEST(LocalRunner, RandomMatmulReluProgramsMeasureAndMatchTheDefault) {
  const Target host = host_target();
  const Task task = matmul_relu_task();
  std::vector<MeasureInput> inputs = random_inputs(task, 8, host, 5);
  ProgramBuilder builder(host, quick_builds());
  std::vector<BuildResult> builds = builder.build(inputs);
  keep_built(inputs, builds);
  ASSERT_GE(inputs.size(), 6u);
  LocalRunnerOptions o;
  o.run.repeat = 2;
  o.run.seed = 7;
  LocalRunner runner(host, builder, o);
  const std::vector<MeasureResult> results = runner.run(inputs, builds);
  ASSERT_EQ(results.size(), inputs.size());
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].error, MeasureError::None) << "program " << i << ": " << results[i].error_msg;
    ASSERT_EQ(results[i].costs.size(), 2u);
    for (double c : results[i].costs) EXPECT_GT(c, 0);
    EXPECT_GT(results[i].all_cost_s, 0);
    EXPECT_GT(results[i].timestamp, 1.6e9);
  }
}

// The default-schedule candidate (the tuner's baseline) builds from the DAG alone, with the parameter
// order of any other candidate, and computes what the naive reference computes.
TEST(LocalRunner, DefaultScheduleCandidateMeasuresAndMatches) {
  const Target host = host_target();
  const Task task = matmul_relu_task();
  auto dag = std::make_shared<const te::ComputeDAG>(task.dag);
  std::vector<MeasureInput> inputs = {{task.key, dag, state::State(dag), 0, true}};
  ProgramBuilder builder(host, quick_builds());
  const std::vector<BuildResult> builds = builder.build(inputs);
  ASSERT_EQ(builds[0].error, MeasureError::None) << builds[0].error_msg;
  LocalRunner runner(host, builder);
  const MeasureResult r = runner.run(inputs, builds)[0];
  EXPECT_EQ(r.error, MeasureError::None) << r.error_msg;
  EXPECT_FALSE(r.costs.empty());
}

// With threads > 1 the child runs parallel loops on a pthread pool: programs with parallel loops still
// match the default schedule (a pool that split work wrongly would not).
TEST(LocalRunner, ParallelLoopsRunOnAThreadPoolAndStillMatch) {
  const Target host = host_target();
  const Task task = matmul_relu_task();
  std::vector<MeasureInput> inputs = random_inputs(task, 6, host, 11);
  int parallel = 0;
  for (const MeasureInput& in : inputs)
    parallel += state::print_state(in.state).find("parallel") != std::string::npos ? 1 : 0;
  ASSERT_GT(parallel, 0) << "no random program has a parallel loop";
  ProgramBuilder builder(host, quick_builds());
  std::vector<BuildResult> builds = builder.build(inputs);
  keep_built(inputs, builds);
  LocalRunnerOptions o;
  o.run.threads = 2;
  LocalRunner runner(host, builder, o);
  for (const MeasureResult& r : runner.run(inputs, builds)) EXPECT_EQ(r.error, MeasureError::None) << r.error_msg;
}

TEST(LocalRunner, WrongProgramIsWrongAnswerAndBuildErrorsPassThrough) {
  const Target host = host_target();
  const Task task = matmul_relu_task();
  std::vector<MeasureInput> inputs = random_inputs(task, 1, host, 9);
  ProgramBuilder builder(host, quick_builds());
  std::vector<BuildResult> builds = builder.build(inputs);
  ASSERT_EQ(builds[0].error, MeasureError::None) << builds[0].error_msg;

  // A hand-made module with the same parameters that writes 0.5 everywhere into the output.
  size_t out_index = 0;
  int64_t out_bytes = 0;
  for (size_t k = 0; k < builds[0].buffers.size(); ++k)
    if (builds[0].buffers[k].role == BufferRole::Output) out_index = k, out_bytes = builds[0].buffers[k].bytes;
  testing::TempDir dir;
  {
    std::ofstream c(dir.path("wrong.c"));
    c << "void " << builds[0].func_name << "(void** b, void* p) { (void)p; float* y = (float*)b[" << out_index
      << "]; for (long i = 0; i < " << out_bytes / 4 << "; ++i) y[i] = 0.5f; }\n";
  }
  ASSERT_EQ(std::system(("cc -shared -fPIC -O1 -o " + dir.path("wrong.so") + " " + dir.path("wrong.c")).c_str()), 0);
  BuildResult wrong = builds[0];
  wrong.so_path = dir.path("wrong.so");
  BuildResult failed;
  failed.error = MeasureError::CompileHost;
  failed.error_msg = "linker said no";

  LocalRunner runner(host, builder);
  const std::vector<MeasureResult> r = runner.run({inputs[0], inputs[0], inputs[0]}, {builds[0], wrong, failed});
  EXPECT_EQ(r[0].error, MeasureError::None) << r[0].error_msg;
  EXPECT_EQ(r[1].error, MeasureError::WrongAnswer) << r[1].error_msg;
  EXPECT_NE(r[1].error_msg.find("differs from the default schedule"), std::string::npos) << r[1].error_msg;
  EXPECT_TRUE(r[1].costs.empty());
  EXPECT_EQ(r[2].error, MeasureError::CompileHost);
  EXPECT_EQ(r[2].error_msg, "linker said no");
}

// ---- RPC: a loopback tracker and servers as child processes ------------------------------------

std::string bin_dir() { return fs::path(KILN_BINARY).parent_path().string(); }

using Proc = rpc::test::Process;

std::vector<std::string> server_argv(uint16_t tracker, const std::string& key) {
  return {KILN_BINARY, "rpc-server", "--host", "127.0.0.1", "--tracker", "127.0.0.1:" + std::to_string(tracker),
          "--key", key};
}

bool have_program(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

TEST(LocalRunner, AArch64TargetRunsThroughItsServerUnderQemu) {
  const std::string cross_server = bin_dir() + "/aarch64/kiln-rpc-server";
  if (access(cross_server.c_str(), X_OK) != 0 || !have_program("qemu-aarch64") ||
      !have_program("aarch64-linux-gnu-gcc"))
    GTEST_SKIP() << "needs " << cross_server << ", qemu-aarch64 and aarch64-linux-gnu-gcc";
  const Target a72 = load_target("aarch64-cortex-a72");
  std::vector<MeasureInput> inputs = random_inputs(matmul_relu_task(), 2, a72, 21);
  ProgramBuilder builder(a72, quick_builds());
  std::vector<BuildResult> builds = builder.build(inputs);
  keep_built(inputs, builds);
  LocalRunnerOptions o;
  o.run.timeout_s = 60;  // emulated
  o.cross_server = cross_server;
  LocalRunner runner(a72, builder, o);
  for (const MeasureResult& r : runner.run(inputs, builds)) {
    EXPECT_EQ(r.error, MeasureError::None) << r.error_msg;
    EXPECT_FALSE(r.costs.empty());
  }
}

TEST(RPCRunner, ParsesAddresses) {
  const RpcAddress a = parse_rpc_address("rpc://127.0.0.1:9190/rk3588");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 9190);
  EXPECT_EQ(a.key, "rk3588");
  EXPECT_THROW(parse_rpc_address("rpc://host:9190"), Error);
  EXPECT_THROW(parse_rpc_address("rpc://host:x/k"), Error);
  EXPECT_THROW(parse_rpc_address("tcp://host:1/k"), Error);
}

TEST(RPCRunner, BatchAcrossTwoX86ServersAndAnAArch64ServerUnderQemu) {
  Proc tracker({KILN_BINARY, "tracker", "--host", "127.0.0.1"});
  ASSERT_NE(tracker.port(), 0);
  Proc x1(server_argv(tracker.port(), "x86")), x2(server_argv(tracker.port(), "x86"));
  ASSERT_TRUE(rpc::test::wait_for_servers(tracker.port(), "x86", 2));

  const Target host = host_target();
  const Task task = matmul_relu_task();
  std::vector<MeasureInput> inputs = random_inputs(task, 6, host, 11);
  ProgramBuilder builder(host, quick_builds());
  std::vector<BuildResult> builds = builder.build(inputs);
  keep_built(inputs, builds);
  RpcRunnerOptions o;
  o.n_parallel = 2;
  o.run.repeat = 2;
  RPCRunner runner({"127.0.0.1", tracker.port(), "x86"}, builder, o);
  for (const MeasureResult& r : runner.run(inputs, builds)) {
    EXPECT_EQ(r.error, MeasureError::None) << r.error_msg;
    EXPECT_EQ(r.costs.size(), 2u);
  }

  const std::string cross_server = bin_dir() + "/aarch64/kiln-rpc-server";
  if (access(cross_server.c_str(), X_OK) != 0 || !have_program("qemu-aarch64") ||
      !have_program("aarch64-linux-gnu-gcc")) {
    GTEST_SKIP() << "AArch64 part skipped: needs " << cross_server << ", qemu-aarch64 and aarch64-linux-gnu-gcc";
  }
  Proc arm({"qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", cross_server, "--host", "127.0.0.1", "--tracker",
            "127.0.0.1:" + std::to_string(tracker.port()), "--key", "aarch64"});
  ASSERT_TRUE(rpc::test::wait_for_servers(tracker.port(), "aarch64", 1));
  const Target a72 = load_target("aarch64-cortex-a72");
  std::vector<MeasureInput> arm_inputs = random_inputs(task, 3, a72, 12);
  ProgramBuilder arm_builder(a72, quick_builds());
  std::vector<BuildResult> arm_builds = arm_builder.build(arm_inputs);
  keep_built(arm_inputs, arm_builds);
  RpcRunnerOptions ao;
  ao.run.timeout_s = 60;  // emulated
  RPCRunner arm_runner({"127.0.0.1", tracker.port(), "aarch64"}, arm_builder, ao);
  for (const MeasureResult& r : arm_runner.run(arm_inputs, arm_builds))
    EXPECT_EQ(r.error, MeasureError::None) << r.error_msg;
}

TEST(RPCRunner, ServerKilledMidBatchCostsOnlyItsCandidates) {
  Proc tracker({KILN_BINARY, "tracker", "--host", "127.0.0.1"});
  ASSERT_NE(tracker.port(), 0);
  Proc doomed(server_argv(tracker.port(), "x86")), survivor(server_argv(tracker.port(), "x86"));
  ASSERT_TRUE(rpc::test::wait_for_servers(tracker.port(), "x86", 2));

  const Target host = host_target();
  const Task task = matmul_relu_task();
  std::vector<MeasureInput> inputs = random_inputs(task, 6, host, 13);
  ProgramBuilder builder(host, quick_builds());
  std::vector<BuildResult> builds = builder.build(inputs);
  keep_built(inputs, builds);
  // Twice the batch, each run lasting >= 3 x 60 ms, so both servers are busy when one is killed.
  const size_t n = inputs.size();
  for (size_t i = 0; i < n; ++i) inputs.push_back(inputs[i]), builds.push_back(builds[i]);
  RpcRunnerOptions o;
  o.n_parallel = 2;
  o.request_timeout_s = 2;
  o.run.repeat = 3;
  o.run.min_repeat_ms = 60;
  RPCRunner runner({"127.0.0.1", tracker.port(), "x86"}, builder, o);
  // A first small batch builds and runs the task's reference, so the kill lands in the real batch.
  ASSERT_EQ(runner.run({inputs[0]}, {builds[0]})[0].error, MeasureError::None);
  std::thread killer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    doomed.kill();
  });
  const std::vector<MeasureResult> results = runner.run(inputs, builds);
  killer.join();
  int ok = 0, lost = 0;
  for (const MeasureResult& r : results) {
    if (r.error == MeasureError::None) ++ok;
    else {
      ++lost;
      // The server's death is no fact about the program: device-lost, which the tuner measures again.
      EXPECT_TRUE(r.error == MeasureError::DeviceLost || r.error == MeasureError::RunTimeout) << r.error_msg;
    }
  }
  EXPECT_GE(lost, 1);
  EXPECT_GE(ok, static_cast<int>(results.size()) - 2);
}

}  // namespace
}  // namespace kiln::measure
