// `kiln tune` end to end: it spends its trials, appends parseable records, draws the curve, resumes
// from its records without measuring a program twice, survives SIGKILL at random moments losing at
// most the batch in flight, reproduces its candidates from a seed, feeds `kiln compile --records`,
// rejects bad arguments with one line, and tunes mnist-8 through the RPC runner against an AArch64
// server under QEMU, and survives 20 kills of itself and of its device server.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "backends/cuda/cuda_toolkit.h"
#include "backends/measure/records.h"
#include "tests/frontend/test_models.h"
#include "tests/runtime/rpc/listening_process.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

using Output = testing::CliOutput;

Output run(const std::string& args, const testing::TempDir& dir) {
  return testing::run_kiln_output("" + args, dir, 600);
}

// MatMul rows x 24 x 24x40 + Relu: one small task, quick to build and run (another task for other rows).
std::string write_model(const TempDir& dir, int64_t rows = 32) {
  ModelBuilder b("mm", 17);
  b.input("a", DType::Float32, Shape{rows, 24});
  Tensor w(DType::Float32, Shape{24, 40});
  for (int64_t i = 0; i < 24 * 40; ++i) w.set_double(i, static_cast<double>(i % 7) / 7 - 0.5);
  b.initializer("w", w);
  b.node("MatMul", {"a", "w"}, {"c"});
  b.node("Relu", {"c"}, {"y"});
  b.output("y", DType::Float32, Shape{rows, 40});
  const std::string path = dir.path("mm" + std::to_string(rows) + ".onnx");
  b.save(path);
  return path;
}

struct RecordsFile {
  std::vector<std::string> programs;  // step lists as JSON text, in file order, the default schedule's not
  size_t defaults = 0;                // measurements of the default schedule (one per round of a task)
  size_t finals = 0;                  // the finalists' re-measurement after tuning (kiln_final)
  int valid = 0;
  int malformed = 0;
};

RecordsFile read_records(const std::string& path) {
  RecordsFile f;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    try {
      const measure::Record r = measure::parse_record(line);
      if (r.final_batch != 0) ++f.finals;  // re-measurements of programs already counted
      else if (r.default_schedule) ++f.defaults;
      else f.programs.push_back(r.task_key + r.steps.dump());
      f.valid += measure::is_valid_record(r);
    } catch (const Error&) {
      ++f.malformed;
    }
  }
  return f;
}

std::string tune_args(const std::string& model, const std::string& records, int trials) {
  return "tune " + model + " --target host --records " + records + " --trials " + std::to_string(trials) +
         " --measures-per-round 4 --population 64 --threads 1 --repeat 1 --plain";
}

TEST(TuneCli, TunesAppendsRecordsDrawsTheCurveResumesAndFeedsCompile) {
  TempDir dir;
  const std::string model = write_model(dir), records = dir.path("r.json");
  Output o = run(tune_args(model, records, 12), dir);
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  RecordsFile f = read_records(records);
  EXPECT_EQ(f.programs.size() + f.defaults, 12u);
  EXPECT_EQ(f.defaults, 1u) << "rounds of 4 measure the default schedule in the first round only";
  EXPECT_EQ(f.malformed, 0);
  EXPECT_GT(f.valid, 0);
  EXPECT_EQ(std::set<std::string>(f.programs.begin(), f.programs.end()).size(), f.programs.size()) << "a program measured twice";
  EXPECT_NE(testing::read_file(records + ".curve.svg").find("<polyline"), std::string::npos);
  EXPECT_NE(o.out.find("estimated latency"), std::string::npos) << o.out;
  // Then each task's 3 fastest programs and its default schedule, timed again side by side.
  EXPECT_GE(f.finals, 2u) << o.out;
  EXPECT_NE(o.out.find("finalists re-measured"), std::string::npos) << o.out;

  // The same command again: everything restored (re-measurements are no trials), nothing left to
  // measure; with --finalists 0 nothing is timed again either.
  o = run(tune_args(model, records, 12) + " --finalists 0", dir);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("12 restored"), std::string::npos) << o.out;
  const size_t finals = f.finals;
  f = read_records(records);
  EXPECT_EQ(f.programs.size() + f.defaults, 12u);
  EXPECT_EQ(f.finals, finals);

  // A larger budget continues with new programs only.
  o = run(tune_args(model, records, 20), dir);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  f = read_records(records);
  EXPECT_EQ(f.programs.size() + f.defaults, 20u);
  EXPECT_EQ(std::set<std::string>(f.programs.begin(), f.programs.end()).size(), f.programs.size());

  o = run("compile " + model + " --target host --records " + records + " -o " + dir.path("pkg"), dir);
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_EQ(o.err.find("no tuning record for task"), std::string::npos) << o.err;
}

// Each measured program's feature rows go beside the records (R.json.features); another model's tune
// with --database trains on them before its first round, and leaves out the tasks it tunes itself.
TEST(TuneCli, ADatabaseOfAnotherModelsFeaturesTrainsTheModelFirst) {
  TempDir dir;
  fs::create_directories(dir.path("db"));
  const std::string first = write_model(dir, 32), second = write_model(dir, 48);
  ASSERT_EQ(run(tune_args(first, dir.path("db/first.json"), 12) + " --finalists 0", dir).exit_code, 0);
  std::ifstream features(dir.path("db/first.json.features"));
  int lines = 0;
  for (std::string line; std::getline(features, line);) lines += !line.empty();
  EXPECT_GT(lines, 0);
  EXPECT_LE(lines, 11) << "one sample per measured program that lowers, none for the default schedule";

  Output o = run(tune_args(second, dir.path("second.json"), 8) + " --finalists 0 --database " + dir.path("db"), dir);
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  EXPECT_NE(o.out.find(std::to_string(lines) + " sample(s) of 1 other task(s) from 1 file(s)"), std::string::npos) << o.out;
  o = run(tune_args(first, dir.path("again.json"), 4) + " --finalists 0 --database " + dir.path("db"), dir);
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("0 sample(s) of 0 other task(s)"), std::string::npos) << "its own task is left out:\n" << o.out;
  o = run(tune_args(first, dir.path("x.json"), 4) + " --database " + dir.path("nowhere"), dir);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("nowhere"), std::string::npos) << o.err;
}

// "The same seed on the same records proposes the same programs": b starts from a's first round
// (its records) and must propose a's second round, although a drew its second round's random choices
// after a first round that b never ran. Two fresh runs share only their first round: later rounds
// depend on the measured times too, which differ from run to run. Another seed proposes others.
TEST(TuneCli, SameSeedProposesTheSameProgramsAndAnotherSeedOthers) {
  TempDir dir;
  const std::string model = write_model(dir);
  ASSERT_EQ(run(tune_args(model, dir.path("a.json"), 8) + " --seed 5", dir).exit_code, 0);
  {
    std::istringstream a_lines(testing::read_file(dir.path("a.json")));
    std::ofstream b(dir.path("b.json"));
    std::string line;
    for (int i = 0; i < 4 && std::getline(a_lines, line); ++i) b << line << "\n";
  }
  ASSERT_EQ(run(tune_args(model, dir.path("b.json"), 8) + " --seed 5", dir).exit_code, 0);
  ASSERT_EQ(run(tune_args(model, dir.path("fresh.json"), 4) + " --seed 5", dir).exit_code, 0);
  ASSERT_EQ(run(tune_args(model, dir.path("c.json"), 8) + " --seed 6", dir).exit_code, 0);
  const auto a = read_records(dir.path("a.json")).programs, b = read_records(dir.path("b.json")).programs,
             fresh = read_records(dir.path("fresh.json")).programs, c = read_records(dir.path("c.json")).programs;
  ASSERT_EQ(a.size(), 7u);  // and the default schedule
  EXPECT_EQ(a, b);
  ASSERT_EQ(fresh.size(), 3u);
  EXPECT_EQ(fresh, std::vector<std::string>(a.begin(), a.begin() + 3));
  EXPECT_NE(a, c);
}

// SIGKILL at random moments (seeded from the clock, printed so a failure can be replayed): every
// complete line stays a record, a cut line is skipped, the restarted tuner loses at most the batch in
// flight, never measures a program twice and ends with exactly the budget.
TEST(TuneCli, KilledAtRandomMomentsAndRestartedEndsWithTheBudgetAndNoRepeats) {
  TempDir dir;
  const std::string model = write_model(dir), records = dir.path("r.json");
  const unsigned seed = static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::mt19937 rng(seed);
  SCOPED_TRACE("kill schedule seed " + std::to_string(seed));
  const int budget = 64;
  // Each candidate runs for at least 100 ms (64 of them: over 6 s of work), so the tuner is still busy
  // when the kills come (at most 3 x 2 s).
  const std::string slow = " --min-repeat-ms 100";
  size_t before = 0;
  for (int kill = 0; kill < 3; ++kill) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      const std::string args = tune_args(model, records, budget) + slow + " >/dev/null 2>&1";
      execl("/bin/sh", "sh", "-c", ("exec " + std::string(KILN_BINARY) + " " + args).c_str(), nullptr);
      _exit(127);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(300, 2000)(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    const RecordsFile f = read_records(records);
    EXPECT_LE(f.malformed, kill + 1) << "only a line cut by a kill may be malformed";
    EXPECT_GE(f.programs.size() + f.defaults, before) << "records were lost";
    before = f.programs.size() + f.defaults;
  }
  EXPECT_LT(before, static_cast<size_t>(budget)) << "the kills came too late to interrupt anything";
  const Output o = run(tune_args(model, records, budget) + slow, dir);
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  const RecordsFile f = read_records(records);
  EXPECT_EQ(f.programs.size() + f.defaults, static_cast<size_t>(budget));
  EXPECT_EQ(std::set<std::string>(f.programs.begin(), f.programs.end()).size(), f.programs.size())
      << "a program was measured twice";
  if (f.malformed > 0) {
    EXPECT_NE(o.err.find("skipped"), std::string::npos) << o.err;
  }
}

// Issue 16's chaos test: a tune through a tracker and a device server, with 20 SIGKILLs at random
// moments (seeded from the clock, printed), each of the tuner (restarted at once: it resumes) or of the
// device server (restarted after a pause: the tuner waits for it). No record may be corrupt beyond a
// line cut by a tuner kill, none measured may be lost, a lost device must never be recorded as a
// failed program, and the tune must end with exactly its budget.
TEST(TuneCli, ChaosKillsOfTheTunerAndTheDeviceServerLoseNothingAndEndAtTheBudget) {
  TempDir dir;
  const std::string model = write_model(dir), records = dir.path("r.json");
  const unsigned seed = static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::mt19937 rng(seed);
  SCOPED_TRACE("kill schedule seed " + std::to_string(seed));
  auto ms = [&](int lo, int hi) { return std::chrono::milliseconds(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  rpc::test::Process tracker({KILN_BINARY, "tracker", "--host", "127.0.0.1"});
  ASSERT_NE(tracker.port(), 0);
  const std::string at = "127.0.0.1:" + std::to_string(tracker.port());
  auto start_server = [&] {
    return std::make_unique<rpc::test::Process>(
        std::vector<std::string>{KILN_BINARY, "rpc-server", "--host", "127.0.0.1", "--tracker", at, "--key", "host"});
  };
  std::unique_ptr<rpc::test::Process> server = start_server();
  ASSERT_TRUE(server->started());
  ASSERT_TRUE(rpc::test::wait_for_servers(tracker.port(), "host", 1));
  const int budget = 96;
  const std::string args = tune_args(model, records, budget) + " --runner rpc://" + at + "/host --min-repeat-ms 30" +
                           " --device-wait 120 --finalists 0";
  auto start_tuner = [&] {
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", ("exec " + std::string(KILN_BINARY) + " " + args + " >/dev/null 2>&1").c_str(), nullptr);
      _exit(127);
    }
    return pid;
  };
  pid_t tuner = start_tuner();
  ASSERT_GT(tuner, 0);
  size_t before = 0;
  int tuner_kills = 0, server_kills = 0;
  for (int kill = 0; kill < 20; ++kill) {
    std::this_thread::sleep_for(ms(300, 1500));
    if (std::uniform_int_distribution<int>(0, 1)(rng) == 0) {
      ::kill(tuner, SIGKILL);
      waitpid(tuner, nullptr, 0);
      ++tuner_kills;
      const RecordsFile f = read_records(records);
      EXPECT_LE(f.malformed, tuner_kills) << "only a line cut by a kill may be malformed";
      EXPECT_GE(f.programs.size() + f.defaults, before) << "records were lost";
      before = f.programs.size() + f.defaults;
      tuner = start_tuner();
      ASSERT_GT(tuner, 0);
    } else {
      server->kill();
      ++server_kills;
      std::this_thread::sleep_for(ms(0, 1500));
      server = start_server();
      ASSERT_TRUE(server->started());
    }
  }
  ::kill(tuner, SIGKILL);
  waitpid(tuner, nullptr, 0);
  EXPECT_LT(read_records(records).programs.size(), static_cast<size_t>(budget)) << "the kills came after the tune ended";
  const Output o = run(args, dir);
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  const RecordsFile f = read_records(records);
  EXPECT_EQ(f.programs.size() + f.defaults, static_cast<size_t>(budget)) << tuner_kills << " tuner kills, " << server_kills << " server kills";
  EXPECT_EQ(std::set<std::string>(f.programs.begin(), f.programs.end()).size(), f.programs.size())
      << "a program was measured twice";
  EXPECT_LE(f.malformed, tuner_kills + 1);
  // The model's programs all run: any failed record would be an outage recorded against a program.
  EXPECT_EQ(static_cast<size_t>(f.valid), f.programs.size() + f.defaults) << testing::read_file(records);
}

TEST(TuneCli, BadArgumentsGetOneLineAndExitCode2) {
  TempDir dir;
  const std::string model = write_model(dir), records = dir.path("r.json");
  struct Case {
    std::string args, needle;
  } cases[] = {
      {tune_args(model, records, 4) + " --strategy fastest", "--strategy"},
      {tune_args(model, records, 4) + " --cost-model best", "--cost-model"},
      {tune_args(model, records, 0), "--trials"},
      {tune_args(dir.path("missing.onnx"), records, 4), "missing.onnx"},
      {"tune " + model + " --target nosuch --records " + records, "nosuch"},
      {tune_args(model, records, 4) + " --runner rpc://nohost", "rpc://nohost"},
  };
  for (const Case& c : cases) {
    const Output o = run(c.args, dir);
    EXPECT_EQ(o.exit_code, 2) << c.args << "\n" << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
    EXPECT_NE(o.err.find(c.needle), std::string::npos) << o.err;
  }
  EXPECT_FALSE(fs::exists(records)) << "a failed start must not create records";
}

// A CUDA target tunes GPU tiles (toolchain/gpu_tune.h). Where no GPU answers, the first round says why
// in one line and exits 2, and nothing is recorded: a program whose device was lost is no measurement.
TEST(TuneCli, ACudaTargetWithoutAGpuSaysWhyAndRecordsNothing) {
  if (cuda::have_cuda_device()) GTEST_SKIP() << "this machine has a GPU: the tune would run";
  if (!cuda::have_ptxas()) GTEST_SKIP() << "no ptxas at " << cuda::ptxas_path();
  const std::string stub = cuda::cuda_root() + "/lib64/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) GTEST_SKIP() << "no driver API stub at " << stub;
  TempDir dir;
  ModelBuilder b("mm64", 17);
  b.input("a", DType::Float32, Shape{64, 64});
  b.initializer("w", Tensor(DType::Float32, Shape{64, 64}));
  b.node("MatMul", {"a", "w"}, {"y"});
  b.output("y", DType::Float32, Shape{64, 64});
  const std::string model = dir.path("mm64.onnx"), records = dir.path("r.json");
  b.save(model);
  const Output o = run("tune " + model + " --target cuda-sm90 --records " + records + " --trials 4 --measures-per-round 4", dir);
  EXPECT_EQ(o.exit_code, 2) << o.out << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_NE(o.err.find("the device ran none"), std::string::npos) << o.err;
  EXPECT_NE(o.out.find("1 of 1 task(s) have matmuls or convolutions to tile"), std::string::npos) << o.out;
  EXPECT_FALSE(fs::exists(records)) << testing::read_file(records);
  // An option of the CPU search is refused by name rather than ignored.
  const Output p = run("tune " + model + " --target cuda-sm90 --records " + records + " --population 64", dir);
  EXPECT_EQ(p.exit_code, 2) << p.err;
  EXPECT_NE(p.err.find("--population does not apply"), std::string::npos) << p.err;
}

bool have_program(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

// The RPC path end to end: a tracker, an AArch64 kiln-rpc-server under QEMU, and `kiln tune` leasing it.
TEST(TuneCli, Mnist8TunesThroughRpcAgainstAnAArch64ServerUnderQemu) {
  const std::string mnist = std::string(KILN_SOURCE_DIR) + "/../shared/models/mnist-8/model.onnx";
  const std::string cross_server = fs::path(KILN_BINARY).parent_path().string() + "/aarch64/kiln-rpc-server";
  if (!fs::exists(mnist)) GTEST_SKIP() << mnist << " is missing";
  if (access(cross_server.c_str(), X_OK) != 0 || !have_program("qemu-aarch64") ||
      !have_program("aarch64-linux-gnu-gcc"))
    GTEST_SKIP() << "needs " << cross_server << ", qemu-aarch64 and aarch64-linux-gnu-gcc";
  rpc::test::Process tracker({KILN_BINARY, "tracker", "--host", "127.0.0.1"});
  ASSERT_NE(tracker.port(), 0);
  rpc::test::Process arm({"qemu-aarch64", "-L", "/usr/aarch64-linux-gnu", cross_server, "--host", "127.0.0.1",
                          "--tracker", "127.0.0.1:" + std::to_string(tracker.port()), "--key", "a72"});
  ASSERT_TRUE(rpc::test::wait_for_servers(tracker.port(), "a72", 1));
  TempDir dir;
  const std::string records = dir.path("mnist.json");
  const Output o = run("tune " + mnist + " --target aarch64-cortex-a72 --records " + records +
                           " --runner rpc://127.0.0.1:" + std::to_string(tracker.port()) +
                           "/a72 --trials 12 --measures-per-round 2 --population 32 --repeat 1 --timeout 60 --plain",
                       dir);
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  const RecordsFile f = read_records(records);
  EXPECT_EQ(f.programs.size() + f.defaults, 12u);
  EXPECT_GT(f.valid, 0) << testing::read_file(records);
  EXPECT_NE(o.out.find("aarch64-cortex-a72"), std::string::npos) << o.out;
}

}  // namespace
}  // namespace kiln
