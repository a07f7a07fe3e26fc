// `kiln records show|distill` and `kiln compile --records` through the real binary: a summary table and
// a distilled log from a small hand-made file; a missing file is one error line; mnist-8 compiled with a
// record for one task runs that task's recorded program, notes every other task, still matches the
// reference, and a record that does not replay is noted and replaced by the default schedule.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/measure/records.h"
#include "frontend/onnx/tensor_proto.h"
#include "frontend/partition/partition.h"
#include "frontend/reference/interpreter.h"
#include "scheduler/sketch/random_program.h"
#include "scheduler/sketch/sketch_rule.h"
#include "scheduler/state/step.h"
#include "scheduler/tasks/task.h"
#include "tests/frontend/test_models.h"
#include "toolchain/run_package.h"
#include "toolchain/pipeline.h"

namespace kiln {
namespace {

const std::string kMnistDir = std::string(KILN_SOURCE_DIR) + "/../shared/models/mnist-8";

using Output = testing::CliOutput;

Output run(const std::string& args, const testing::TempDir& dir) {
  return testing::run_kiln_output("" + args, dir, 300);
}

int count_lines(const std::string& s, const std::string& needle) {
  int n = 0;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

std::string line_of(const std::string& key, const std::string& target, std::vector<double> costs,
                    measure::MeasureError error = measure::MeasureError::None, double timestamp = 1.7e9,
                    nlohmann::json steps = nlohmann::json::array()) {
  measure::Record r;
  r.task_key = key;
  r.target = target;
  r.hardware = {2, 64, 64, 0, 0, 0, 0, 0};
  r.steps = std::move(steps);
  r.result.costs = std::move(costs);
  r.result.error = error;
  r.result.all_cost_s = 1;
  r.result.timestamp = timestamp;
  return measure::record_line(r);
}

// Two tasks on one target and one task on another; one wrong answer; a truncated last line.
std::string small_log() {
  using measure::MeasureError;
  std::string s;
  s += line_of("00000000000000aa", "x86_64-avx2", {2e-3}, MeasureError::None, 1718000000) + "\n";
  s += line_of("00000000000000aa", "x86_64-avx2", {1e-3, 1e-3}, MeasureError::None, 1718000100) + "\n";
  s += line_of("00000000000000aa", "x86_64-avx2", {1e-4}, MeasureError::WrongAnswer, 1718000200) + "\n";
  s += line_of("00000000000000bb", "x86_64-avx2", {4e-3}, MeasureError::None, 1718000300) + "\n";
  s += line_of("00000000000000aa", "aarch64-neon", {8e-3}, MeasureError::None, 1718000400) + "\n";
  s += line_of("00000000000000aa", "x86_64-avx2", {0.5e-3}).substr(0, 40);  // killed mid-append
  return s;
}

TEST(RecordsCli, ShowPrintsOneRowPerTaskAndTargetAndTotals) {
  testing::TempDir dir;
  std::ofstream(dir.path("log.json")) << small_log();
  const Output o = run("records show " + dir.path("log.json"), dir);
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  EXPECT_EQ(count_lines(o.err, "kiln: warning: "), 1) << o.err;
  EXPECT_NE(o.err.find("skipped 1 malformed record line(s) (first at line 6)"), std::string::npos) << o.err;
  EXPECT_EQ(count_lines(o.out, "00000000000000aa"), 2) << o.out;
  EXPECT_EQ(count_lines(o.out, "00000000000000bb"), 1) << o.out;
  EXPECT_EQ(count_lines(o.out, "1000.000"), 1) << o.out;  // best of aa on avx2, in µs
  EXPECT_NE(o.out.find("wrong-answer 1"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("2024-06-10 06:13:20"), std::string::npos) << o.out;  // first of aa, UTC
  EXPECT_NE(o.out.find("total: 5 records, 4 valid, 2 tasks"), std::string::npos) << o.out;
}

TEST(RecordsCli, DistillKeepsTheBestPerTaskAndTarget) {
  testing::TempDir dir;
  std::ofstream(dir.path("log.json")) << small_log();
  const Output o = run("records distill " + dir.path("log.json") + " -o " + dir.path("best.json"), dir);
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  std::ostringstream warnings;
  const std::vector<measure::Record> best = measure::load_records(dir.path("best.json"), warnings);
  EXPECT_EQ(warnings.str(), "");
  ASSERT_EQ(best.size(), 3u);
  for (const measure::Record& r : best) {
    if (r.task_key == "00000000000000aa" && r.target == "x86_64-avx2") {
      EXPECT_DOUBLE_EQ(measure::mean_cost(r), 1e-3);
    }
    if (r.target == "aarch64-neon") {
      EXPECT_DOUBLE_EQ(measure::mean_cost(r), 8e-3);
    }
  }
  // Distilling in place replaces the file whole and leaves no temporary beside it.
  const Output again = run("records distill " + dir.path("best.json") + " -o " + dir.path("best.json"), dir);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(measure::load_records(dir.path("best.json")).size(), 3u);
  int files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(std::filesystem::path(dir.path("best.json")).parent_path()))
    ++files;
  EXPECT_EQ(files, 4);  // log.json, best.json, out.txt, err.txt: no temporary left
}

TEST(RecordsCli, MissingFileIsOneErrorLine) {
  testing::TempDir dir;
  testing::relu_model().save(dir.path("m.onnx"));
  for (const std::string& args : {"records show " + dir.path("none.json"),
                                  "records distill " + dir.path("none.json") + " -o " + dir.path("x.json"),
                                  "compile " + dir.path("m.onnx") + " -o " + dir.path("pkg") + " --records " +
                                      dir.path("none.json")}) {
    const Output o = run(args, dir);
    EXPECT_EQ(o.exit_code, 2) << args;
    EXPECT_EQ(count_lines(o.err, ""), 1) << o.err;
    EXPECT_EQ(o.err.rfind("kiln: error: ", 0), 0u) << o.err;
    EXPECT_NE(o.err.find(dir.path("none.json")), std::string::npos) << o.err;
  }
}

TEST(RecordsCli, RecordsExcludeARandomSchedule) {
  testing::TempDir dir;
  std::ofstream(dir.path("log.json")) << small_log();
  testing::relu_model().save(dir.path("m.onnx"));
  const Output o = run("compile " + dir.path("m.onnx") + " -o " + dir.path("pkg") + " --schedule random --records " +
                           dir.path("log.json"),
                       dir);
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.err.find("--records"), std::string::npos) << o.err;
}

// mnist-8's tasks, a random program for one of them, and the reference output of its test data.
struct Mnist {
  Graph g;
  std::vector<Task> tasks;
  std::map<std::string, Tensor> inputs;
  std::vector<Tensor> expected;
};

Mnist load_mnist() {
  Mnist m;
  m.g = load_model(kMnistDir + "/model.onnx", PipelineOptions{});
  m.tasks = target_tasks(m.g, host_target().vector_bits);  // the tasks `kiln compile` makes
  std::string name;
  Tensor x = load_tensor_file(kMnistDir + "/test_data_set_0/input_0.pb", &name);
  if (name.empty()) name = m.g.inputs.at(0);
  m.inputs.emplace(name, std::move(x));
  m.expected = run_reference(m.g, m.inputs);
  return m;
}

void expect_package_matches(const std::string& pkg, const Mnist& m) {
  const std::vector<Tensor> got = run_package(pkg, resolve_target("host"), m.inputs, 1).outputs;
  ASSERT_EQ(got.size(), m.expected.size());
  for (size_t o = 0; o < got.size(); ++o) {
    ASSERT_EQ(got[o].byte_size(), m.expected[o].byte_size());
    const float* a = reinterpret_cast<const float*>(got[o].data());
    const float* b = reinterpret_cast<const float*>(m.expected[o].data());
    for (size_t i = 0; i < got[o].byte_size() / sizeof(float); ++i)
      EXPECT_NEAR(a[i], b[i], 1e-4 + 1e-3 * std::fabs(b[i])) << "output " << o << " element " << i;
  }
}

TEST(RecordsCli, CompileWithRecordsAppliesTheBestRecordAndNotesTheRest) {
  if (!std::filesystem::exists(kMnistDir + "/model.onnx")) GTEST_SKIP() << kMnistDir << " is missing";
  testing::TempDir dir;
  const Mnist m = load_mnist();
  ASSERT_GE(m.tasks.size(), 2u);
  size_t tuned = 0;  // a conv task, the kind tuning is for
  for (size_t i = 0; i < m.tasks.size(); ++i)
    if (m.tasks[i].anchor == "Conv") {
      tuned = i;
      break;
    }
  const Task& task = m.tasks[tuned];
  const Target host = host_target();
  auto dag = std::make_shared<const te::ComputeDAG>(task.dag);
  sketch::SearchParams params;
  params.cores = std::max(host.cores, 1);
  params.vector_lanes = std::max(host.vector_bits / 32, 1);
  sketch::Rng rng(7);
  const state::State program = sketch::sample_program(sketch::generate_sketches(state::State(dag), params), params, rng);
  measure::MeasureResult fast, slow, wrong;
  fast.costs = {1e-4};
  slow.costs = {1e-3};
  wrong.costs = {1e-6};
  wrong.error = measure::MeasureError::WrongAnswer;
  const std::string records = dir.path("mnist.json");
  measure::append_record(records, task.key, host, state::State(dag), slow);
  measure::append_record(records, task.key, host, program, fast);
  measure::append_record(records, task.key, host, state::State(dag), wrong);

  const Output o = run("compile " + kMnistDir + "/model.onnx -o " + dir.path("pkg") + " --records " + records +
                           " --dump-after schedule",
                       dir);
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  // The recorded program (the fast one) is the one compiled for its task; every other task says it
  // keeps the default schedule.
  EXPECT_EQ(count_lines(o.out, "; after schedule of task"), static_cast<int>(m.tasks.size())) << o.out;
  EXPECT_EQ(count_lines(o.out, "default schedule"), static_cast<int>(m.tasks.size()) - 1) << o.out;
  EXPECT_NE(o.out.find("; after schedule of task " + task.key), std::string::npos) << o.out;
  EXPECT_NE(o.out.find(state::print_steps(program)), std::string::npos) << o.out;
  EXPECT_EQ(count_lines(o.err, "kiln: note: no tuning record for task"), static_cast<int>(m.tasks.size()) - 1) << o.err;
  EXPECT_EQ(o.err.find(task.key), std::string::npos) << o.err;
  for (const Task& t : m.tasks)
    if (t.key != task.key) {
      const std::string note = "kiln: note: no tuning record for task " + t.key + " (" + t.anchor + " " +
                               t.node_names.at(0) + "): default schedule";
      EXPECT_NE(o.err.find(note), std::string::npos) << note << "\n" << o.err;
    }
  expect_package_matches(dir.path("pkg"), m);
}

TEST(RecordsCli, ARecordThatDoesNotReplayFallsBackToTheDefault) {
  if (!std::filesystem::exists(kMnistDir + "/model.onnx")) GTEST_SKIP() << kMnistDir << " is missing";
  testing::TempDir dir;
  const Mnist m = load_mnist();
  const Task& task = m.tasks.at(0);
  const std::string records = dir.path("bad.json");
  // Splits a stage the task does not have.
  std::ofstream(records) << line_of(task.key, host_target().name, {1e-4}, measure::MeasureError::None, 1.7e9,
                                    nlohmann::json::parse(R"([["SP", 99, 0, 8, [2], 1]])"))
                         << "\n";
  const Output o = run("compile " + kMnistDir + "/model.onnx -o " + dir.path("pkg") + " --records " + records, dir);
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  EXPECT_EQ(count_lines(o.err, "kiln: note: record for task " + task.key + " does not replay ("), 1) << o.err;
  EXPECT_NE(o.err.find("): default schedule"), std::string::npos) << o.err;
  EXPECT_EQ(count_lines(o.err, "kiln: note: "), static_cast<int>(m.tasks.size())) << o.err;
  expect_package_matches(dir.path("pkg"), m);
}

// Searched programs store the weights their tiles read in the tiles' order (the LR step): the package
// carries the rewritten weight instead of the original, and computes what the reference does.
TEST(RecordsCli, RewrittenWeightsReplaceTheOriginalsInThePackage) {
  if (!std::filesystem::exists(kMnistDir + "/model.onnx")) GTEST_SKIP() << kMnistDir << " is missing";
  testing::TempDir dir;
  const Mnist m = load_mnist();
  const Output o = run("compile " + kMnistDir + "/model.onnx -o " + dir.path("pkg") +
                           " --schedule random --seed 7 --dump-after lower",
                       dir);
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  int rewritten = 0;
  std::istringstream lines(o.out);
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find(".tiled: ");
    if (line.rfind("weight ", 0) != 0 || at == std::string::npos) continue;
    ++rewritten;
    const std::string original = line.substr(0, at) + ": ";  // "weight NAME: "
    EXPECT_EQ(o.out.find(original), std::string::npos) << "both layouts of " << original << "are in the package\n" << o.out;
  }
  EXPECT_GE(rewritten, 1) << o.out;
  expect_package_matches(dir.path("pkg"), m);
}

// The best record does not replay (a foreign or edited line); the next-best valid one does, and is
// used instead of the default schedule.
TEST(RecordsCli, ABestRecordThatDoesNotReplayFallsBackToTheNextBest) {
  if (!std::filesystem::exists(kMnistDir + "/model.onnx")) GTEST_SKIP() << kMnistDir << " is missing";
  testing::TempDir dir;
  const Mnist m = load_mnist();
  const Task& task = m.tasks.at(0);
  auto dag = std::make_shared<const te::ComputeDAG>(task.dag);
  sketch::SearchParams params;
  sketch::Rng rng(11);
  const state::State program = sketch::sample_program(sketch::generate_sketches(state::State(dag), params), params, rng);
  const std::string records = dir.path("r.json");
  measure::MeasureResult slower;
  slower.costs = {1e-3};
  std::ofstream(records) << line_of(task.key, host_target().name, {1e-4}, measure::MeasureError::None, 1.7e9,
                                    nlohmann::json::parse(R"([["SP", 99, 0, 8, [2], 1]])"))
                         << "\n";
  measure::append_record(records, task.key, host_target(), program, slower);
  const Output o = run("compile " + kMnistDir + "/model.onnx -o " + dir.path("pkg") + " --records " + records +
                           " --dump-after schedule",
                       dir);
  ASSERT_EQ(o.exit_code, 0) << o.out << o.err;
  EXPECT_NE(o.err.find("kiln: note: the best 1 record(s) for task " + task.key + " do not replay"), std::string::npos) << o.err;
  EXPECT_NE(o.out.find(state::print_steps(program)), std::string::npos) << o.out;
  expect_package_matches(dir.path("pkg"), m);
}

}  // namespace
}  // namespace kiln
