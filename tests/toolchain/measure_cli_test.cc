// `kiln measure` end to end: records written with append_record for mnist-8's tasks are replayed,
// built and run locally and printed as a table; a corrupt line is skipped with a warning; a JSON line
// that is not a record, and a record of a task the model does not have, fail naming the file and line.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/measure/records.h"
#include "frontend/partition/partition.h"
#include "scheduler/tasks/task.h"
#include "tests/frontend/test_models.h"
#include "toolchain/pipeline.h"

namespace kiln {
namespace {

const std::string kMnist = std::string(KILN_SOURCE_DIR) + "/../shared/models/mnist-8/model.onnx";

using Output = testing::CliOutput;

Output run_measure(const std::string& args, const testing::TempDir& dir) {
  return testing::run_kiln_output("measure " + args, dir, 300);
}

int count_lines(const std::string& s, const std::string& needle) {
  int n = 0;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

TEST(MeasureCli, Mnist8RecordsRemeasureLocallyAndACorruptLineIsSkipped) {
  if (!std::filesystem::exists(kMnist)) GTEST_SKIP() << kMnist << " is missing";
  testing::TempDir dir;
  const std::string records = dir.path("mnist.json");
  const Target host = host_target();
  const std::vector<Task> tasks = target_tasks(load_model(kMnist, PipelineOptions{}), host.vector_bits);
  ASSERT_FALSE(tasks.empty());
  measure::MeasureResult recorded;
  recorded.costs = {0.001, 0.0011};
  recorded.all_cost_s = 0.5;
  recorded.timestamp = 1.7e9;
  for (size_t i = 0; i < tasks.size(); ++i) {
    auto dag = std::make_shared<const te::ComputeDAG>(tasks[i].dag);
    measure::append_record(records, tasks[i].key, host, state::State(dag), recorded);
    if (i == 0) std::ofstream(records, std::ios::app) << "{\"i\": [[\"truncated\n";
  }
  const Output o = run_measure(records + " --target " + host.name + " --runner local --repeat 1 --model " + kMnist, dir);
  EXPECT_EQ(o.exit_code, 0) << o.out << o.err;
  EXPECT_EQ(count_lines(o.err, "warning"), 1) << o.err;
  EXPECT_NE(o.err.find("mnist.json:2"), std::string::npos) << o.err;
  EXPECT_EQ(count_lines(o.out, " none"), static_cast<int>(tasks.size())) << o.out;
  EXPECT_NE(o.out.find(tasks[0].key), std::string::npos);
  EXPECT_NE(o.out.find("1.0500"), std::string::npos) << o.out;  // the record's mean, in ms
}

TEST(MeasureCli, MalformedRecordAndUnknownTaskNameTheFileAndLine) {
  if (!std::filesystem::exists(kMnist)) GTEST_SKIP() << kMnist << " is missing";
  testing::TempDir dir;
  const std::string records = dir.path("bad.json");
  std::ofstream(records) << "\n{\"i\": 5, \"r\": [], \"v\": \"v0.6\"}\n";
  Output o = run_measure(records + " --target x86_64-generic --model " + kMnist, dir);
  EXPECT_NE(o.exit_code, 0);
  EXPECT_NE(o.err.find("bad.json:2"), std::string::npos) << o.err;

  const std::string other = dir.path("other.json");
  std::ofstream(other) << "{\"i\": [[\"0123456789abcdef\", \"x86_64-generic\", []], [[], []]], \"r\": [[0.1], 0, 1, 2], "
                          "\"v\": \"v0.6\"}\n";
  o = run_measure(other + " --target x86_64-generic --model " + kMnist, dir);
  EXPECT_NE(o.exit_code, 0);
  EXPECT_NE(o.err.find("0123456789abcdef"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("other.json:1"), std::string::npos) << o.err;

  o = run_measure(other + " --target x86_64-generic", dir);  // --model is required
  EXPECT_NE(o.exit_code, 0);
  EXPECT_NE(o.err.find("--model"), std::string::npos) << o.err;
}

}  // namespace
}  // namespace kiln
