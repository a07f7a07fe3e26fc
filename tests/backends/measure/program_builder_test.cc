// The measurement builder: batches of random programs built in worker processes into shared objects
// that compute what the DAG computes (host), cross-built ones that are AArch64 ELF files, and faults
// (an unlowerable state, a crashing or hanging worker, a tiny time limit, a bad compiler) reported as
// error codes while the rest of the batch builds.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "backends/measure/program_builder.h"
#include "frontend/partition/partition.h"
#include "scheduler/sketch/random_program.h"
#include "scheduler/sketch/sketch_rule.h"
#include "scheduler/state/steps/split_step.h"
#include "scheduler/tasks/task.h"
#include "tests/backends/measure/built_program_check.h"
#include "tests/backends/measure/measure_tasks.h"
#include "tests/frontend/test_models.h"
#include "toolchain/pipeline.h"

namespace kiln::measure {
namespace {

namespace fs = std::filesystem;

// The one task of a model whose anchor is `anchor`.
using testing::matmul_relu_task;
using testing::task_of;

Task conv_task() {
  ModelBuilder b("conv", 17);
  b.input("x", DType::Float32, Shape{1, 4, 10, 10});
  b.initializer("w", testing::random_weights({8, 4, 3, 3}, 1));
  b.initializer("b", testing::random_weights({8}, 2));
  b.node("Conv", {"x", "w", "b"}, {"c"})
      .attr("strides", std::vector<int64_t>{1, 1})
      .attr("pads", std::vector<int64_t>{1, 1, 1, 1});
  b.node("Relu", {"c"}, {"y"});
  b.output("y", DType::Float32, Shape{1, 8, 10, 10});
  return task_of(b, "Conv");
}

sketch::SearchParams params_for(const Target& t) {
  sketch::SearchParams p;
  p.cores = std::max(t.cores, 1);
  p.vector_lanes = t.vector_lanes(4);
  return p;
}

// `n` random programs of the task (seeded), as measurement inputs.
std::vector<MeasureInput> random_inputs(const Task& task, int n, const Target& target, uint64_t seed) {
  auto dag = std::make_shared<const te::ComputeDAG>(task.dag);
  const sketch::SearchParams p = params_for(target);
  std::vector<state::State> sketches = sketch::generate_sketches(state::State(dag), p);
  sketch::Rng rng(seed);
  std::vector<MeasureInput> out;
  for (int i = 0; i < n; ++i) out.push_back({task.key, dag, sketch::sample_program(sketches, p, rng)});
  return out;
}

// The initial state with one split whose length is never chosen: it cannot lower.
MeasureInput unlowerable_input(const Task& task) {
  auto dag = std::make_shared<const te::ComputeDAG>(task.dag);
  state::State s(dag);
  const int stage = static_cast<int>(s.stages().size()) - 1;
  const int64_t extent = s.stage(stage).node_of(0).extent;
  s.apply(std::make_shared<state::SplitStep>(stage, 0, extent, std::vector<std::optional<int64_t>>{std::nullopt}));
  return {task.key, dag, s};
}

bool have_program(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

// No worker of the builder is left behind (every child reaped).
void expect_no_children() {
  errno = 0;
  EXPECT_EQ(waitpid(-1, nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST(ProgramBuilder, HostProgramsMatchTheEvaluator) {
  const Target host = host_target();
  const Task matmul = matmul_relu_task(), conv = conv_task();
  std::vector<MeasureInput> inputs = random_inputs(matmul, 16, host, 1);
  for (MeasureInput& in : random_inputs(conv, 16, host, 2)) inputs.push_back(std::move(in));
  // Most programs build in 0.1-0.5 s, but LLVM's O3 on a deeply unrolled, vectorized conv nest can take
  // over 20 s (one of these 32 does): such a candidate is a BuildTimeout, as it would be when tuning.
  BuilderOptions o;
  o.timeout_s = 8;
  ProgramBuilder builder(host, o);
  const std::vector<BuildResult> results = builder.build(inputs);
  ASSERT_EQ(results.size(), inputs.size());
  int built = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const BuildResult& r = results[i];
    if (r.error == MeasureError::BuildTimeout) continue;
    ASSERT_EQ(r.error, MeasureError::None) << "program " << i << ": " << r.error_msg;
    ++built;
    EXPECT_TRUE(fs::exists(r.so_path));
    EXPECT_EQ(fs::path(r.so_path).parent_path(), fs::path(builder.build_dir()));
    EXPECT_GT(r.time_s, 0);
    EXPECT_EQ(r.buffers.front().role, BufferRole::Input);
    EXPECT_EQ(std::count_if(r.buffers.begin(), r.buffers.end(), [](const BufferSpec& b) { return b.role == BufferRole::Output; }), 1);
    EXPECT_EQ(testing::check_built_program(r, *inputs[i].dag, 100 + i), "")
        << "program " << i << "\n" << state::print_steps(inputs[i].state);
  }
  EXPECT_GE(built, 28) << "too many build timeouts";
  expect_no_children();
}

TEST(ProgramBuilder, LaterBatchesKeepEarlierModules) {
  const Target host = host_target();
  const Task matmul = matmul_relu_task();
  BuilderOptions one_at_a_time;
  one_at_a_time.n_parallel = 1;
  ProgramBuilder builder(host, one_at_a_time);
  const BuildResult first = builder.build(random_inputs(matmul, 1, host, 7)).at(0);
  const BuildResult second = builder.build(random_inputs(matmul, 1, host, 8)).at(0);
  ASSERT_EQ(first.error, MeasureError::None) << first.error_msg;
  ASSERT_EQ(second.error, MeasureError::None) << second.error_msg;
  EXPECT_NE(first.so_path, second.so_path);
  EXPECT_TRUE(fs::exists(first.so_path));
}

TEST(ProgramBuilder, CrossBuildsAArch64SharedObjects) {
  if (!have_program("aarch64-linux-gnu-gcc")) GTEST_SKIP() << "aarch64-linux-gnu-gcc is not installed";
  const Target a72 = load_target("aarch64-cortex-a72");
  const Task matmul = matmul_relu_task(), conv = conv_task();
  std::vector<MeasureInput> inputs = random_inputs(matmul, 2, a72, 3);
  for (MeasureInput& in : random_inputs(conv, 2, a72, 4)) inputs.push_back(std::move(in));
  ProgramBuilder builder(a72);
  for (const BuildResult& r : builder.build(inputs)) {
    ASSERT_EQ(r.error, MeasureError::None) << r.error_msg;
    std::ifstream in(r.so_path, std::ios::binary);
    unsigned char header[20] = {};
    ASSERT_TRUE(in.read(reinterpret_cast<char*>(header), sizeof header)) << r.so_path;
    EXPECT_EQ(std::string(reinterpret_cast<char*>(header), 4), "\x7f" "ELF");
    EXPECT_EQ(header[4], 2) << "ELFCLASS64";
    EXPECT_EQ(header[16] | header[17] << 8, 3) << "ET_DYN";
    EXPECT_EQ(header[18] | header[19] << 8, 183) << "EM_AARCH64";
  }
}

TEST(ProgramBuilder, FaultsAreReportedAndTheRestBuilds) {
  const Target host = host_target();
  const Task matmul = matmul_relu_task();
  std::vector<MeasureInput> inputs = random_inputs(matmul, 6, host, 5);
  inputs[1] = unlowerable_input(matmul);
  BuilderOptions o;
  o.timeout_s = 4;
  o.in_worker = [](size_t index) {
    // A worker that crashes. The default action first: a handler an earlier test in this process
    // installed (LLVM's crash handlers) could otherwise return from the raise, and the worker build on.
    if (index == 3) {
      std::signal(SIGSEGV, SIG_DFL);
      std::raise(SIGSEGV);
    }
    if (index == 4) std::this_thread::sleep_for(std::chrono::seconds(60));       // one that hangs
  };
  ProgramBuilder builder(host, o);
  const std::vector<BuildResult> results = builder.build(inputs);
  ASSERT_EQ(results.size(), 6u);
  EXPECT_EQ(results[1].error, MeasureError::Instantiation) << results[1].error_msg;
  EXPECT_NE(results[1].error_msg.find("lower"), std::string::npos) << results[1].error_msg;
  EXPECT_EQ(results[3].error, MeasureError::Unknown) << results[3].error_msg;
  EXPECT_NE(results[3].error_msg.find("died"), std::string::npos) << results[3].error_msg;
  EXPECT_EQ(results[4].error, MeasureError::BuildTimeout) << results[4].error_msg;
  EXPECT_LT(results[4].time_s, 10);
  for (size_t i : {0, 2, 5}) {
    ASSERT_EQ(results[i].error, MeasureError::None) << i << ": " << results[i].error_msg;
    EXPECT_EQ(testing::check_built_program(results[i], *inputs[i].dag, i), "") << i;
  }
  for (size_t i : {1, 3, 4}) EXPECT_TRUE(results[i].so_path.empty()) << i;
  expect_no_children();
}

TEST(ProgramBuilder, TinyTimeLimitIsBuildTimeout) {
  const Target host = host_target();
  BuilderOptions tiny;
  tiny.timeout_s = 0.001;
  ProgramBuilder builder(host, tiny);
  const std::vector<BuildResult> results = builder.build(random_inputs(matmul_relu_task(), 3, host, 6));
  for (const BuildResult& r : results) {
    EXPECT_EQ(r.error, MeasureError::BuildTimeout) << r.error_msg;
    EXPECT_TRUE(r.so_path.empty());
  }
  expect_no_children();
  // A killed worker leaves no half-written files behind.
  EXPECT_TRUE(fs::is_empty(builder.build_dir()));
}

TEST(ProgramBuilder, BadCompilerIsCompileHost) {
  const Task matmul = matmul_relu_task();
  Target missing = host_target();
  missing.cc = "/nonexistent/kiln-cc";
  Target failing = host_target();
  failing.cc = "false";
  for (const Target& t : {missing, failing}) {
    ProgramBuilder builder(t);
    for (const BuildResult& r : builder.build(random_inputs(matmul, 2, t, 7))) {
      EXPECT_EQ(r.error, MeasureError::CompileHost) << r.error_msg;
      EXPECT_NE(r.error_msg.find("link"), std::string::npos) << r.error_msg;
      EXPECT_FALSE(r.buffers.empty()) << "lowering succeeded, so the buffers are known";
    }
  }
}

TEST(ProgramBuilder, UnknownTripleFailsAtConstruction) {
  Target t = host_target();
  t.triple = "nonsense-unknown-none";
  EXPECT_THROW(ProgramBuilder{t}, Error);
}

TEST(ProgramBuilder, OwnedBuildDirectoryIsRemoved) {
  std::string dir;
  {
    ProgramBuilder builder(host_target());
    dir = builder.build_dir();
    EXPECT_TRUE(fs::is_directory(dir));
  }
  EXPECT_FALSE(fs::exists(dir));
}

}  // namespace
}  // namespace kiln::measure
