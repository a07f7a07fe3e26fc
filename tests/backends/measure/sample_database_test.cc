// The features sidecar (backends/measure/sample_database.h): lines read back as the samples written,
// and a database keeps its target's samples of other tasks, spread evenly, skipping what it cannot use.
#include "backends/measure/sample_database.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "frontend/ir/error.h"
#include "scheduler/search/features.h"
#include "tests/frontend/test_models.h"

namespace kiln::measure {
namespace {

namespace fs = std::filesystem;

search::ProgramFeatures rows(float v, int n = 2) {
  return search::ProgramFeatures(static_cast<size_t>(n), std::vector<float>(search::kFeaturesPerStore, v));
}

void write(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path);
  for (const std::string& l : lines) out << l << "\n";
}

TEST(SampleDatabase, LinesReadBackAsTheSamplesWritten) {
  testing::TempDir dir;
  write(dir.path("r.json.features"), {sample_line("a", "t", rows(1.2345678f), 2e-3),
                                      sample_line("a", "t", rows(0.5f, 1), INFINITY)});
  std::ostringstream warnings;
  const SampleDatabase db = load_sample_database(dir.path("r.json.features"), "t", {}, 100, warnings);
  ASSERT_EQ(db.samples.size(), 2u);
  EXPECT_EQ(warnings.str(), "");
  EXPECT_EQ(db.tasks, 1u);
  EXPECT_EQ(db.samples[0].task_key, "a");
  EXPECT_DOUBLE_EQ(db.samples[0].cost_s, 2e-3);
  ASSERT_EQ(db.samples[0].features.size(), 2u);
  EXPECT_NEAR(db.samples[0].features[0][7], 1.23457f, 1e-6);  // 6 significant digits
  EXPECT_TRUE(std::isinf(db.samples[1].cost_s)) << "a failed program is a sample too (the model learns it is slow)";
  EXPECT_EQ(db.samples[1].features.size(), 1u);
}

// A directory is searched recursively for *.features; other targets and excluded tasks are left out;
// lines of another feature version, of another row width, or not JSON are skipped with one warning
// per file; the limit is shared evenly between tasks, each keeping its fastest and slowest.
TEST(SampleDatabase, ADirectoryKeepsItsTargetsOtherTasksSpreadEvenly) {
  testing::TempDir dir;
  fs::create_directories(dir.path("db/deeper"));
  std::vector<std::string> a, b;
  for (int i = 0; i < 10; ++i) a.push_back(sample_line("a", "t", rows(static_cast<float>(i)), (i + 1) * 1e-3));
  a.push_back(sample_line("a", "other-target", rows(1), 1e-3));
  a.push_back("not json");
  std::string old = sample_line("a", "t", rows(1), 1e-3);
  old.replace(old.find("\"v\":" + std::to_string(search::kFeatureVersion)), 5, "\"v\":0");
  a.push_back(old);
  a.push_back(sample_line("a", "t", search::ProgramFeatures{{1, 2, 3}}, 1e-3));  // a row of 3 values
  for (int i = 0; i < 4; ++i) b.push_back(sample_line("b", "t", rows(1), 1e-3));
  write(dir.path("db/a.json.features"), a);
  write(dir.path("db/deeper/b.json.features"), b);
  write(dir.path("db/c.json.features.bak"), {sample_line("c", "t", rows(1), 1e-3)});
  write(dir.path("db/own.json.features"), {sample_line("own", "t", rows(1), 1e-3)});

  std::ostringstream warnings;
  SampleDatabase db = load_sample_database(dir.path("db"), "t", {"own"}, 100, warnings);
  EXPECT_EQ(db.files, 3u);
  EXPECT_EQ(db.tasks, 2u);
  EXPECT_EQ(db.skipped, 3u);
  EXPECT_EQ(db.samples.size(), 14u);
  const std::string warned = warnings.str();
  EXPECT_NE(warned.find("a.json.features: skipped 3 line(s)"), std::string::npos) << warned;
  EXPECT_EQ(std::count(warned.begin(), warned.end(), '\n'), 1);

  db = load_sample_database(dir.path("db"), "t", {"own"}, 6, warnings);
  ASSERT_EQ(db.samples.size(), 6u);
  std::vector<double> a_costs;
  for (const search::MeasuredSample& s : db.samples)
    if (s.task_key == "a") a_costs.push_back(s.cost_s);
  ASSERT_EQ(a_costs.size(), 3u);
  EXPECT_DOUBLE_EQ(a_costs.front(), 1e-3) << "the fastest stays";
  EXPECT_GT(a_costs.back(), 5e-3) << "and slow ones too";
}

TEST(SampleDatabase, AMissingPathIsAnErrorNamingIt) {
  try {
    load_sample_database("/nonexistent/db", "t", {}, 10);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/db"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::measure
