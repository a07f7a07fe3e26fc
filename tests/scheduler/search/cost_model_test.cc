// The cost models on synthetic programs whose true cost is a known function of a few features: XGBoost
// ranks held-out programs of every task well although the tasks' costs differ 1000-fold, failures teach
// it without breaking it, it predicts random scores until warm-up, its saved model predicts identically
// after loading, a bad file is a one-line error naming the path, and a seed makes it deterministic.
#include "scheduler/search/cost_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <limits>
#include <memory>
#include <numeric>
#include <random>

#include <unistd.h>

#include "frontend/ir/error.h"

namespace kiln::search {
namespace {

constexpr double kFail = std::numeric_limits<double>::infinity();

// The true seconds of one store row: depends on 4 of the 164 features (an exponential, a product and a
// step), so the model must find them among 160 noise columns. Its spread (about 30x between rows) is like
// that of real schedules of one task.
double row_cost(const std::vector<float>& row) {
  return std::exp2(row[0] / 2) * (1 + row[5] * row[9] / 16) + (row[20] > 4 ? 2 : 0);
}

// A synthetic task: its programs have `rows` stores and cost `scale` x the sum of their rows' costs.
struct SyntheticTask {
  std::string key;
  double scale;
  int rows;
  bool failures = false;  // when set, a program with a row whose feature 40 exceeds 7 fails (~23% of 2-row programs)
};

struct Program {
  ProgramFeatures features;
  double cost_s;
};

Program random_program(const SyntheticTask& task, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> value(0, 8);
  Program p;
  double cost = 0;
  bool fails = false;
  for (int r = 0; r < task.rows; ++r) {
    // As in real programs, many features are the same for every program of a task (here 0): only the
    // first 64 vary, 4 of them meaningfully.
    std::vector<float> row(kFeaturesPerStore, 0.0f);
    for (int f = 0; f < 64; ++f) row[f] = value(rng);
    cost += row_cost(row);
    fails |= task.failures && row[40] > 7.0f;
    p.features.push_back(std::move(row));
  }
  p.cost_s = fails ? kFail : task.scale * cost;
  return p;
}

std::vector<Program> random_programs(const SyntheticTask& task, int n, std::mt19937_64& rng) {
  std::vector<Program> out;
  for (int i = 0; i < n; ++i) out.push_back(random_program(task, rng));
  return out;
}

std::vector<MeasuredSample> samples_of(const SyntheticTask& task, const std::vector<Program>& programs) {
  std::vector<MeasuredSample> out;
  for (const Program& p : programs) out.push_back({task.key, p.features, p.cost_s});
  return out;
}

std::vector<ProgramFeatures> features_of(const std::vector<Program>& programs) {
  std::vector<ProgramFeatures> out;
  for (const Program& p : programs) out.push_back(p.features);
  return out;
}

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size(); ++i) r[order[i]] = static_cast<double>(i);
  return r;
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> ra = ranks(a), rb = ranks(b);
  double n = static_cast<double>(a.size()), mean = (n - 1) / 2, cov = 0, var = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    var += (ra[i] - mean) * (ra[i] - mean);
  }
  return cov / var;
}

// Of the truly fastest 10% of `programs`, the share the model also puts in its top 10%: what the search
// gets out of the model, since it measures only the best predicted few.
double top10_recall(const std::vector<Program>& programs, const std::vector<double>& scores) {
  size_t k = programs.size() / 10;
  std::vector<size_t> by_cost(programs.size()), by_score(programs.size());
  std::iota(by_cost.begin(), by_cost.end(), 0);
  std::iota(by_score.begin(), by_score.end(), 0);
  std::sort(by_cost.begin(), by_cost.end(), [&](size_t a, size_t b) { return programs[a].cost_s < programs[b].cost_s; });
  std::sort(by_score.begin(), by_score.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  size_t hits = 0;
  for (size_t i = 0; i < k; ++i)
    hits += std::count(by_score.begin(), by_score.begin() + static_cast<std::ptrdiff_t>(k), by_cost[i]);
  return static_cast<double>(hits) / static_cast<double>(k);
}

double true_throughput(const Program& p) { return std::isfinite(p.cost_s) ? 1 / p.cost_s : 0; }

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("kiln_cost_model_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

XGBoostOptions small_options() {
  XGBoostOptions o;
  o.threads = 2;
  o.max_rounds = 150;
  return o;
}

// Three tasks whose costs differ 1000-fold each, trained together on `n` programs each.
struct Trained {
  std::vector<SyntheticTask> tasks = {{"fast", 1e-6, 2}, {"medium", 1e-3, 1}, {"slow", 1, 3}};
  std::vector<std::vector<Program>> train, held_out;
  XGBoostModel model{small_options()};

  explicit Trained(int n) {
    std::mt19937_64 rng(7);
    std::vector<MeasuredSample> all;
    for (const SyntheticTask& t : tasks) {
      train.push_back(random_programs(t, n, rng));
      held_out.push_back(random_programs(t, 200, rng));
      std::vector<MeasuredSample> s = samples_of(t, train.back());
      all.insert(all.end(), s.begin(), s.end());
    }
    model.update(all);
  }
};

// Training takes seconds: the tests that only read a trained model share one, freed before XGBoost's
// own globals are (a function-local static would outlive them and crash at exit).
class XGBoostTrainedModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { trained_ = std::make_unique<Trained>(600); }
  static void TearDownTestSuite() { trained_.reset(); }
  static Trained& shared_model() { return *trained_; }

 private:
  static std::unique_ptr<Trained> trained_;
};
std::unique_ptr<Trained> XGBoostTrainedModel::trained_;

// Spearman and top-10% recall on 200 held-out programs of each task. By chance, Spearman on 200 pairs is
// 0 with a standard deviation of 1/sqrt(199) ~ 0.07, and top-10% recall is 0.10 with a deviation of about
// 0.07, so 0.65 (9 deviations) and 0.3 (3) are far beyond luck. The model reaches Spearman 0.94 / 0.86 /
// 0.74 and recall 0.55 / 0.75 / 0.40 on the 1-, 2- and 3-row tasks: a pack-sum of per-row scores fits the
// throughput 1/sum(row costs) less well the more rows there are, which is Ansor's model, not a bug.
TEST_F(XGBoostTrainedModel, RanksHeldOutProgramsOfEveryTaskAlthoughTheirCostsDiffer1000Fold) {
  Trained& t = shared_model();
  ASSERT_TRUE(t.model.wants_features());
  ASSERT_EQ(t.model.num_samples(), 1800u);
  for (size_t i = 0; i < t.tasks.size(); ++i) {
    std::vector<double> scores = t.model.predict(features_of(t.held_out[i]));
    std::vector<double> truth;
    for (const Program& p : t.held_out[i]) truth.push_back(true_throughput(p));
    double rho = spearman(scores, truth), recall = top10_recall(t.held_out[i], scores);
    std::printf("task %s: Spearman %.3f, top-10%% recall %.2f\n", t.tasks[i].key.c_str(), rho, recall);
    EXPECT_GT(rho, 0.65) << t.tasks[i].key;
    EXPECT_GE(recall, 0.3) << t.tasks[i].key;
  }
}

// Normalised throughput puts every task's best program at 1 whatever its seconds: the model's score for
// each task's best training program is near 1 in all three tasks (without normalisation the labels would
// be 1e6, 1e3 and 1, and the slow task would be invisible to a squared loss).
TEST_F(XGBoostTrainedModel, NormalisationPutsEveryTasksBestProgramNearOne) {
  Trained& t = shared_model();
  for (size_t i = 0; i < t.tasks.size(); ++i) {
    const std::vector<Program>& train = t.train[i];
    size_t best = std::min_element(train.begin(), train.end(),
                                   [](const Program& a, const Program& b) { return a.cost_s < b.cost_s; }) -
                  train.begin();
    double score = t.model.predict({train[best].features})[0];
    EXPECT_NEAR(score, 1.0, 0.15) << t.tasks[i].key;
  }
}

TEST(XGBoostCostModel, LearnsThatFailedProgramsScoreLow) {
  SyntheticTask task{"with_failures", 1e-3, 2, /*failures*/ true};
  std::mt19937_64 rng(11);
  std::vector<Program> train = random_programs(task, 400, rng), held_out = random_programs(task, 300, rng);
  XGBoostModel model(small_options());
  model.update(samples_of(task, train));
  std::vector<double> scores = model.predict(features_of(held_out));
  double failed_sum = 0, valid_sum = 0;
  int failed = 0, valid = 0;
  for (size_t i = 0; i < held_out.size(); ++i) {
    ASSERT_TRUE(std::isfinite(scores[i]));
    if (std::isfinite(held_out[i].cost_s)) {
      valid_sum += scores[i];
      ++valid;
    } else {
      failed_sum += scores[i];
      ++failed;
    }
  }
  ASSERT_GT(failed, 20);
  // A failure's label is 0 and a valid program's averages about 0.6 here.
  EXPECT_LT(failed_sum / failed, 0.5 * valid_sum / valid);
  std::vector<double> truth;
  for (const Program& p : held_out) truth.push_back(true_throughput(p));
  EXPECT_GT(spearman(scores, truth), 0.7);
}

TEST(XGBoostCostModel, TaskWhereEveryProgramFailedTrainsToFiniteScores) {
  SyntheticTask task{"all_fail", 1, 2};
  std::mt19937_64 rng(3);
  std::vector<Program> programs = random_programs(task, 80, rng);
  for (Program& p : programs) p.cost_s = kFail;
  XGBoostModel model(small_options());
  model.update(samples_of(task, programs));
  ASSERT_TRUE(model.wants_features());
  for (double s : model.predict(features_of(programs))) EXPECT_NEAR(s, 0.0, 1e-3);
}

TEST(XGBoostCostModel, PredictsRandomScoresUntilWarmUp) {
  SyntheticTask task{"t", 1, 2};
  std::mt19937_64 rng(5);
  XGBoostOptions options = small_options();
  options.warmup_samples = 64;
  XGBoostModel model(options), twin(options);
  std::vector<Program> programs = random_programs(task, 63, rng);
  model.update(samples_of(task, programs));
  EXPECT_EQ(model.num_samples(), 63u);
  EXPECT_FALSE(model.wants_features());
  // Before warm-up the search extracts no features: programs without rows still get random scores.
  std::vector<ProgramFeatures> no_rows(50);
  std::vector<double> first = model.predict(no_rows), second = model.predict(no_rows);
  for (double s : first) {
    EXPECT_GE(s, 0.0);
    EXPECT_LT(s, 1.0);
  }
  EXPECT_NE(first, second);
  twin.update(samples_of(task, programs));
  EXPECT_EQ(twin.predict(no_rows), first) << "random scores come from the seed and the sample count";

  model.update(samples_of(task, random_programs(task, 1, rng)));
  EXPECT_TRUE(model.wants_features());
  std::vector<double> scores = model.predict({programs[0].features, {}});
  EXPECT_EQ(scores[1], kNoFeaturesScore);
  EXPECT_GT(scores[0], kNoFeaturesScore);
}

TEST_F(XGBoostTrainedModel, SaveThenLoadPredictsIdentically) {
  Trained& t = shared_model();
  std::string path = temp_path("model.bin");  // not .json: the file is JSON whatever its name
  t.model.save(path);
  {
    std::ifstream in(path);
    ASSERT_EQ(in.peek(), '{');
  }
  XGBoostModel loaded(small_options());
  EXPECT_FALSE(loaded.wants_features());
  loaded.load(path);
  EXPECT_TRUE(loaded.wants_features());
  EXPECT_EQ(loaded.num_samples(), 0u);
  for (const std::vector<Program>& held_out : t.held_out)
    EXPECT_EQ(loaded.predict(features_of(held_out)), t.model.predict(features_of(held_out)));
  std::filesystem::remove(path);
}

void expect_one_line_error_naming(const std::function<void()>& f, const std::string& path) {
  try {
    f();
    ADD_FAILURE() << "no error for " << path;
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST_F(XGBoostTrainedModel, LoadOfMissingOrCorruptFileIsOneLineErrorNamingThePath) {
  XGBoostModel model(small_options());
  std::string missing = temp_path("does_not_exist.json");
  expect_one_line_error_naming([&] { model.load(missing); }, missing);

  std::string not_json = temp_path("garbage.json");
  std::ofstream(not_json) << "this is not a model";
  expect_one_line_error_naming([&] { model.load(not_json); }, not_json);

  // Valid start, truncated: XGBoost's own parse error (several lines with a trace) is cut to one.
  Trained& t = shared_model();
  std::string truncated = temp_path("truncated.json");
  t.model.save(truncated);
  std::filesystem::resize_file(truncated, std::filesystem::file_size(truncated) / 2);
  expect_one_line_error_naming([&] { model.load(truncated); }, truncated);
  EXPECT_FALSE(model.wants_features()) << "a failed load leaves the model as it was";

  std::string empty = temp_path("empty.json");
  std::ofstream{empty};
  expect_one_line_error_naming([&] { model.load(empty); }, empty);

  std::string untrained = temp_path("untrained.json");
  expect_one_line_error_naming([&] { model.save(untrained); }, untrained);
  for (const std::string& p : {not_json, truncated, empty}) std::filesystem::remove(p);
}

TEST(XGBoostCostModel, RowOfWrongWidthIsRefused) {
  XGBoostModel model(small_options());
  ProgramFeatures bad = {std::vector<float>(kFeaturesPerStore), std::vector<float>(10)};
  EXPECT_THROW(model.update({{"t", bad, 1.0}}), Error);
  EXPECT_EQ(model.num_samples(), 0u);
}

TEST(XGBoostCostModel, SameSeedAndSamplesGiveTheSamePredictions) {
  Trained a(60), b(60);
  for (size_t i = 0; i < a.tasks.size(); ++i)
    EXPECT_EQ(a.model.predict(features_of(a.held_out[i])), b.model.predict(features_of(b.held_out[i])));
}

TEST(RandomCostModel, ScoresAreSeededAndIgnoreFeatures) {
  auto a = make_random_model(9), b = make_random_model(9), c = make_random_model(10);
  EXPECT_FALSE(a->wants_features());
  std::vector<ProgramFeatures> programs(20);
  std::vector<double> sa = a->predict(programs);
  EXPECT_EQ(sa, b->predict(programs));
  EXPECT_NE(sa, c->predict(programs));
  a->update({{"t", {}, 1.0}, {"t", {}, kFail}});
  EXPECT_EQ(a->num_samples(), 2u);
  EXPECT_FALSE(a->wants_features());
}

// The size the tuner reaches after ~30 rounds of 64 programs: run by hand to see how long a retraining
// takes (--gtest_also_run_disabled_tests --gtest_filter='*UpdateTime*').
TEST(XGBoostCostModel, DISABLED_UpdateTimeFor2000ProgramsOf10Rows) {
  SyntheticTask task{"big", 1e-3, 10};
  std::mt19937_64 rng(1);
  std::vector<Program> programs = random_programs(task, 2000, rng);
  XGBoostOptions options;  // defaults: all cores, 300 rounds at most
  XGBoostModel model(options);
  auto start = std::chrono::steady_clock::now();
  model.update(samples_of(task, programs));
  double update_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  start = std::chrono::steady_clock::now();
  model.predict(features_of(programs));
  double predict_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("update of 2000 programs x 10 rows x %d features: %.2f s; predict: %.3f s\n", kFeaturesPerStore,
              update_s, predict_s);
}

}  // namespace
}  // namespace kiln::search
