// Reading whole records files: corrupt and truncated lines are skipped with one warning per file, a
// missing file is an error naming it, and best_records keeps the fastest valid record per (task,
// target), which record_line writes back unchanged.
#include "backends/measure/records.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "frontend/ir/error.h"
#include "tests/frontend/test_models.h"

namespace kiln::measure {
namespace {

Record make_record(const std::string& key, const std::string& target, std::vector<double> costs,
                   MeasureError error = MeasureError::None, double timestamp = 1.7e9) {
  Record r;
  r.task_key = key;
  r.target = target;
  r.hardware = {8, 32, 64, 0, 0, 0, 0, 0};
  r.steps = nlohmann::json::array({nlohmann::json::array({"CI", 2})});
  r.result.costs = std::move(costs);
  r.result.error = error;
  r.result.all_cost_s = 0.5;
  r.result.timestamp = timestamp;
  return r;
}

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path);
  for (const auto& l : lines) out << l << "\n";
}

int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

TEST(LoadRecords, CorruptAndTruncatedLinesAreSkippedWithOneWarning) {
  testing::TempDir dir;
  const std::string path = dir.path("log.json");
  const std::string good = record_line(make_record("00000000000000aa", "x86_64-avx2", {1e-3}));
  write_lines(path, {good, "not json at all", good, "", "{\"i\": 5, \"r\": [], \"v\": \"v0.6\"}", good,
                     good.substr(0, good.size() / 2)});
  std::ostringstream warnings;
  const std::vector<Record> records = load_records(path, warnings);
  EXPECT_EQ(records.size(), 3u);
  EXPECT_EQ(count_lines(warnings.str()), 1) << warnings.str();
  EXPECT_EQ(warnings.str(), "kiln: warning: " + path + ": skipped 3 malformed record line(s) (first at line 2)\n");
}

// A step nested 100,000 deep crashed the reader (the JSON library recurses); it is refused unparsed,
// while a string full of brackets is not nesting at all.
TEST(LoadRecords, ALineNestedTooDeepIsSkippedNotACrash) {
  testing::TempDir dir;
  const std::string path = dir.path("log.json");
  const std::string good = record_line(make_record("00000000000000aa", "x86_64-avx2", {1e-3}));
  const std::string deep = std::string(100000, '[') + "1" + std::string(100000, ']');
  std::string bad = good;
  const size_t at = bad.find("\"CI\"");
  ASSERT_NE(at, std::string::npos) << bad;
  bad.insert(at, deep + ", ");  // the step ["CI", 2] becomes [<100,000 levels>, "CI", 2]
  write_lines(path, {good, bad});
  std::ostringstream warnings;
  EXPECT_EQ(load_records(path, warnings).size(), 1u);
  EXPECT_NE(warnings.str().find("skipped 1 malformed"), std::string::npos) << warnings.str();
  EXPECT_THROW(parse_record(bad), Error);
  Record quoted = make_record("00000000000000aa", "x86_64-avx2", {1e-3});
  quoted.target = std::string(200, '[');
  EXPECT_EQ(parse_record(record_line(quoted)).target, quoted.target);
}

TEST(LoadRecords, ACleanFileWarnsNothing) {
  testing::TempDir dir;
  const std::string path = dir.path("log.json");
  write_lines(path, {record_line(make_record("00000000000000aa", "t", {1e-3}))});
  std::ostringstream warnings;
  EXPECT_EQ(load_records(path, warnings).size(), 1u);
  EXPECT_EQ(warnings.str(), "");
}

TEST(LoadRecords, MissingFileIsAnErrorNamingIt) {
  testing::TempDir dir;
  const std::string path = dir.path("nope.json");
  try {
    load_records(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(BestRecords, FastestValidRecordPerTaskAndTarget) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<Record> records = {
      make_record("a", "t1", {3e-3, 3e-3}),
      make_record("a", "t1", {1e-3, 3e-3}),                      // mean 2e-3: best of a/t1
      make_record("a", "t1", {1e-4}, MeasureError::WrongAnswer),  // fast but wrong
      make_record("a", "t1", {inf}),                             // not a time
      make_record("a", "t1", {}),                                // no time
      make_record("a", "t2", {5e-3}),                            // other target: its own best
      make_record("b", "t1", {4e-3}, MeasureError::None, 1),     // tie: the earlier wins
      make_record("b", "t1", {4e-3}, MeasureError::None, 2),
      make_record("c", "t1", {1e-3}, MeasureError::RunTimeout),  // no valid record: absent
      make_record("a", "t1", {-1}),                              // not a time: would win every comparison
      make_record("a", "t1", {0, 1e-3}),                         // a zero is no measured time either
  };
  const std::map<RecordKey, Record> best = best_records(records);
  ASSERT_EQ(best.size(), 3u);
  EXPECT_DOUBLE_EQ(mean_cost(best.at({"a", "t1"})), 2e-3);
  EXPECT_DOUBLE_EQ(mean_cost(best.at({"a", "t2"})), 5e-3);
  EXPECT_EQ(best.at({"b", "t1"}).result.timestamp, 1);
  EXPECT_EQ(best.count({"c", "t1"}), 0u);
  EXPECT_FALSE(is_valid_record(records[3]));
  EXPECT_FALSE(is_valid_record(records[4]));
  EXPECT_FALSE(is_valid_record(records[9]));
  EXPECT_FALSE(is_valid_record(records[10]));
}

TEST(BestRecords, DistilledLinesReadBackTheSame) {
  testing::TempDir dir;
  const std::string path = dir.path("best.json");
  const std::vector<Record> records = {make_record("a", "t1", {2e-3, 1e-3}), make_record("a", "t1", {0.1234567891234e-3}),
                                       make_record("b", "t1", {4e-3})};
  std::vector<std::string> lines;
  for (const auto& [k, r] : best_records(records)) lines.push_back(record_line(r));
  write_lines(path, lines);
  const std::vector<Record> back = load_records(path);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].task_key, "a");
  EXPECT_EQ(back[0].result.costs, std::vector<double>{0.1234567891234e-3});
  EXPECT_EQ(back[0].hardware, records[1].hardware);
  EXPECT_EQ(back[0].steps, records[1].steps);
  EXPECT_EQ(back[1].task_key, "b");
  EXPECT_EQ(record_line(back[1]), record_line(records[2]));
}

}  // namespace
}  // namespace kiln::measure

namespace kiln::measure {
namespace {

// A default-schedule record keeps its flag through a line, and competes for "best" like any record:
// compile --records then keeps the default schedule for that task.
TEST(BestRecords, DefaultScheduleRecordsRoundTripAndCanBeTheBest) {
  Record d = make_record("00000000000000aa", "t", {1e-3});
  d.steps = nlohmann::json::array();
  d.default_schedule = true;
  const Record back = parse_record(record_line(d));
  EXPECT_TRUE(back.default_schedule);
  EXPECT_NE(record_line(d).find("\"kiln_default\":true"), std::string::npos);
  EXPECT_FALSE(parse_record(record_line(make_record("00000000000000aa", "t", {1e-3}))).default_schedule);
  const auto best = best_records({make_record("00000000000000aa", "t", {2e-3}), d});
  ASSERT_EQ(best.size(), 1u);
  EXPECT_TRUE(best.begin()->second.default_schedule);
}

// A finalists' re-measurement ranks first: its records were timed side by side at one moment, where a
// search record may owe its time to a quiet moment of a loaded machine. Of several re-measurements the
// latest counts; the rest stay as fallbacks, fastest first. The marks survive a write and a read.
TEST(BestRecords, TheLatestFinalistsReMeasurementRanksFirst) {
  Record lucky = make_record("a", "t", {1e-3});  // searched while the machine was briefly quiet
  Record old_final = make_record("a", "t", {1.5e-3, 1.5e-3});
  old_final.final_batch = 100;
  Record final_slow = make_record("a", "t", {4e-3, 4e-3});
  final_slow.final_batch = 200;
  Record final_fast = make_record("a", "t", {3e-3, 3e-3});
  final_fast.final_batch = 200;
  final_fast.reference_drift = 1.25;
  const Record back = parse_record(record_line(final_fast));
  EXPECT_EQ(back.final_batch, 200);
  EXPECT_DOUBLE_EQ(back.reference_drift, 1.25);
  EXPECT_EQ(parse_record(record_line(lucky)).final_batch, 0);
  EXPECT_EQ(record_line(lucky).find("kiln_"), std::string::npos) << "unmarked records carry no kiln keys";

  const auto ranked = ranked_records({lucky, old_final, final_slow, final_fast});
  ASSERT_EQ(ranked.size(), 1u);
  const std::vector<Record>& list = ranked.begin()->second;
  ASSERT_EQ(list.size(), 4u);
  EXPECT_DOUBLE_EQ(mean_cost(list[0]), 3e-3);
  EXPECT_DOUBLE_EQ(mean_cost(list[1]), 4e-3);
  EXPECT_DOUBLE_EQ(mean_cost(list[2]), 1e-3);
  EXPECT_DOUBLE_EQ(mean_cost(list[3]), 1.5e-3);
  EXPECT_EQ(best_records({lucky, final_fast}).begin()->second.final_batch, 200);
  EXPECT_EQ(best_records({lucky, old_final}).begin()->second.final_batch, 100);
}

}  // namespace
}  // namespace kiln::measure
