// The cost models: random scores, and XGBoost trained with a pack-sum objective through its C API.
#include "scheduler/search/cost_model.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "frontend/ir/error.h"

namespace kiln::search {
namespace {

// A uniform double in [0, 1) from the top 53 bits: unlike std::uniform_real_distribution its values are
// the same with every standard library, so a seed gives the same scores everywhere.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

std::vector<double> random_scores(std::mt19937_64& rng, size_t n) {
  std::vector<double> scores(n);
  for (double& s : scores) s = uniform01(rng);
  return scores;
}

// The generator of random scores after `samples` samples: a function of the seed and the sample count,
// not of how many scores were drawn before, so a tuner resumed from records (which retrains on all of
// them at once) scores its next round as the interrupted one would have.
void reseed(std::mt19937_64& rng, uint64_t seed, size_t samples) {
  rng.seed(seed ^ (0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(samples) + 1)));
}

class RandomModel : public CostModel {
 public:
  explicit RandomModel(uint64_t seed) : seed_(seed) { reseed(rng_, seed_, 0); }
  void update(const std::vector<MeasuredSample>& samples) override {
    seen_ += samples.size();
    reseed(rng_, seed_, seen_);
  }
  std::vector<double> predict(const std::vector<ProgramFeatures>& programs) override {
    return random_scores(rng_, programs.size());
  }
  size_t num_samples() const override { return seen_; }
  bool wants_features() const override { return false; }

 private:
  uint64_t seed_;
  std::mt19937_64 rng_;
  size_t seen_ = 0;
};

// XGBoost's messages carry a stack trace after the first line; a kiln::Error is one line.
std::string xgboost_message() {
  std::string msg = XGBGetLastError();
  if (size_t nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
  return msg;
}

// Every XGBoost call goes through this: a non-zero return becomes a kiln::Error naming what was done.
void check(int rc, const std::string& what) {
  if (rc != 0) throw Error("cost model: XGBoost failed to " + what + ": " + xgboost_message());
}

struct DMatrixDeleter {
  void operator()(void* h) const { XGDMatrixFree(h); }
};
struct BoosterDeleter {
  void operator()(void* h) const { XGBoosterFree(h); }
};
using DMatrix = std::unique_ptr<void, DMatrixDeleter>;
using Booster = std::unique_ptr<void, BoosterDeleter>;

// A dense matrix of store rows. The features have no missing values, so NaN marks "missing" and a 0 stays
// a real 0 (XGBoost's default missing value would be NaN too; it is spelled out because 0 would be wrong).
DMatrix make_dmatrix(const std::vector<float>& rows, size_t num_rows, int threads) {
  DMatrixHandle h = nullptr;
  check(XGDMatrixCreateFromMat_omp(rows.data(), num_rows, kFeaturesPerStore,
                                   std::numeric_limits<float>::quiet_NaN(), &h, threads),
        "create a DMatrix of " + std::to_string(num_rows) + " rows");
  return DMatrix(h);
}

// A row of the wrong width would shift every later row of the flat matrix, so it is refused.
void check_width(const ProgramFeatures& program, size_t program_index) {
  for (const std::vector<float>& row : program)
    if (row.size() != static_cast<size_t>(kFeaturesPerStore))
      throw Error("cost model: program " + std::to_string(program_index) + " has a feature row of " +
                  std::to_string(row.size()) + " values, expected " + std::to_string(kFeaturesPerStore));
}

void append_rows(const ProgramFeatures& program, std::vector<float>& flat) {
  for (const std::vector<float>& row : program) flat.insert(flat.end(), row.begin(), row.end());
}

bool failed(double cost_s) { return !std::isfinite(cost_s) || cost_s <= 0; }

// Rounds without a better training RMSE after which boosting stops (Ansor's early stopping uses 50 on a
// validation metric; the training loss is smooth, so a plateau this long means the trees add nothing).
constexpr int kStallRounds = 20;

// The smallest sample weight. Ansor weighs a sample by its label, so a failed program weighs 0 and the
// model never learns that a region of the space fails: it may keep predicting high scores there. A floor
// keeps failures and very slow programs pulling their predictions towards 0, while the best programs
// still weigh 20 times as much, so the fit stays most accurate where the search picks.
constexpr double kMinWeight = 0.05;

}  // namespace

std::unique_ptr<CostModel> make_random_model(uint64_t seed) { return std::make_unique<RandomModel>(seed); }

struct XGBoostModel::Impl {
  // One measured program: where its rows are in `rows`.
  struct Program {
    std::string task_key;
    double cost_s;
    size_t first_row;
    size_t num_rows;
  };

  XGBoostOptions options;
  int threads;
  std::mt19937_64 rng;
  std::vector<Program> programs;
  std::vector<float> rows;  // every sample's rows, kFeaturesPerStore values each
  Booster booster;          // null until trained or loaded

  explicit Impl(XGBoostOptions o)
      : options(o),
        threads(o.threads > 0 ? o.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))),
        rng() {
    reseed(rng, options.seed, 0);
  }

  size_t total_rows() const { return rows.size() / kFeaturesPerStore; }

  // Ansor's parameters, plus what the pack-sum objective needs: base_score 0 so that an untrained row adds
  // nothing to its program's sum, the histogram method because exact splits on every distinct value of
  // 164 columns make a round several times slower for no better ranking.
  void set_params(BoosterHandle h) const {
    const std::pair<const char*, std::string> params[] = {
        {"max_depth", "10"},     {"gamma", "0.001"},        {"min_child_weight", "0"},
        {"eta", "0.2"},          {"base_score", "0"},       {"tree_method", "hist"},
        {"verbosity", "0"},      {"nthread", std::to_string(threads)},
        {"seed", std::to_string(options.seed)},             {"disable_default_eval_metric", "1"},
    };
    for (const auto& [name, value] : params)
      check(XGBoosterSetParam(h, name, value.c_str()), std::string("set parameter ") + name);
  }

  // Per program: the task's best finite cost / its cost, 0 for a failure or a task without a valid program.
  std::vector<double> labels() const {
    std::unordered_map<std::string, double> best;
    for (const Program& p : programs) {
      if (failed(p.cost_s)) continue;
      auto [it, inserted] = best.emplace(p.task_key, p.cost_s);
      if (!inserted) it->second = std::min(it->second, p.cost_s);
    }
    std::vector<double> out(programs.size(), 0.0);
    for (size_t i = 0; i < programs.size(); ++i)
      if (!failed(programs[i].cost_s)) out[i] = best.at(programs[i].task_key) / programs[i].cost_s;
    return out;
  }

  void train() {
    if (total_rows() == 0) return;  // no program with features: nothing to learn from
    DMatrix dtrain = make_dmatrix(rows, total_rows(), threads);
    DMatrixHandle caches[] = {dtrain.get()};
    BoosterHandle h = nullptr;
    check(XGBoosterCreate(caches, 1, &h), "create a booster");
    Booster fresh(h);
    set_params(h);

    std::vector<double> label = labels();
    std::vector<double> weight(label.size());
    for (size_t i = 0; i < label.size(); ++i) weight[i] = std::max(label[i], kMinWeight);
    std::vector<float> grad(total_rows()), hess(total_rows());
    for (const Program& p : programs)
      std::fill_n(hess.begin() + static_cast<std::ptrdiff_t>(p.first_row), p.num_rows,
                  static_cast<float>(weight[&p - programs.data()]));

    double best_rmse = std::numeric_limits<double>::infinity();
    int best_round = 0;
    for (int round = 0; round < options.max_rounds; ++round) {
      // Training predictions come from XGBoost's cache of this DMatrix, so each round only adds one tree.
      bst_ulong n = 0;
      const float* pred = nullptr;
      check(XGBoosterPredict(h, dtrain.get(), /*output margin*/ 1, 0, /*training*/ 1, &n, &pred),
            "predict the training rows");
      double squared = 0;
      size_t counted = 0;
      for (size_t i = 0; i < programs.size(); ++i) {
        const Program& p = programs[i];
        if (p.num_rows == 0) continue;
        double sum = 0;
        for (size_t r = 0; r < p.num_rows; ++r) sum += pred[p.first_row + r];
        double residual = sum - label[i];
        squared += residual * residual;
        ++counted;
        std::fill_n(grad.begin() + static_cast<std::ptrdiff_t>(p.first_row), p.num_rows,
                    static_cast<float>(weight[i] * residual));
      }
      double rmse = std::sqrt(squared / static_cast<double>(counted));
      if (rmse < best_rmse * (1 - 1e-6)) {
        best_rmse = rmse;
        best_round = round;
      } else if (round - best_round >= kStallRounds) {
        break;
      }
      check(XGBoosterBoostOneIter(h, dtrain.get(), grad.data(), hess.data(), total_rows()),
            "boost round " + std::to_string(round));
    }
    booster = std::move(fresh);
  }
};

XGBoostModel::XGBoostModel(XGBoostOptions options) : impl_(std::make_unique<Impl>(options)) {}
XGBoostModel::~XGBoostModel() = default;

void XGBoostModel::update(const std::vector<MeasuredSample>& samples) {
  Impl& m = *impl_;
  for (size_t i = 0; i < samples.size(); ++i) check_width(samples[i].features, i);
  for (const MeasuredSample& s : samples) {
    size_t first = m.total_rows();
    append_rows(s.features, m.rows);
    m.programs.push_back({s.task_key, s.cost_s, first, s.features.size()});
  }
  reseed(m.rng, m.options.seed, m.programs.size());
  // Below the warm-up a (loaded) booster is kept as it is: a few samples would train a worse one.
  if (m.programs.size() >= static_cast<size_t>(std::max(m.options.warmup_samples, 1))) m.train();
}

std::vector<double> XGBoostModel::predict(const std::vector<ProgramFeatures>& programs) {
  Impl& m = *impl_;
  if (!m.booster) return random_scores(m.rng, programs.size());
  std::vector<float> flat;
  for (size_t i = 0; i < programs.size(); ++i) check_width(programs[i], i);
  for (const ProgramFeatures& p : programs) append_rows(p, flat);
  std::vector<double> scores(programs.size(), kNoFeaturesScore);
  size_t num_rows = flat.size() / kFeaturesPerStore;
  if (num_rows == 0) return scores;
  DMatrix d = make_dmatrix(flat, num_rows, m.threads);
  bst_ulong n = 0;
  const float* pred = nullptr;
  check(XGBoosterPredict(m.booster.get(), d.get(), /*output margin*/ 1, 0, /*training*/ 0, &n, &pred),
        "predict " + std::to_string(num_rows) + " rows");
  if (n != num_rows)
    throw Error("cost model: XGBoost returned " + std::to_string(n) + " predictions for " +
                std::to_string(num_rows) + " rows");
  size_t row = 0;
  for (size_t i = 0; i < programs.size(); ++i) {
    if (programs[i].empty()) continue;
    double sum = 0;
    for (size_t r = 0; r < programs[i].size(); ++r) sum += pred[row++];
    scores[i] = sum;
  }
  return scores;
}

size_t XGBoostModel::num_samples() const { return impl_->programs.size(); }

bool XGBoostModel::wants_features() const { return impl_->booster != nullptr; }

void XGBoostModel::save(const std::string& path) const {
  if (!impl_->booster) throw Error("cost model: cannot save " + path + ": the model is not trained yet");
  // Through a buffer rather than XGBoosterSaveModel, which picks the format by the file's extension: the
  // file is XGBoost's JSON whatever it is called, and a write error names the path in one line.
  bst_ulong len = 0;
  const char* data = nullptr;
  check(XGBoosterSaveModelToBuffer(impl_->booster.get(), R"({"format": "json"})", &len, &data),
        "serialize the model for " + path);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data, static_cast<std::streamsize>(len));
  out.close();
  if (!out) throw Error("cost model: cannot write " + path);
}

void XGBoostModel::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cost model: cannot read " + path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.empty() || text.front() != '{') throw Error("cost model: " + path + " is not an XGBoost JSON model");
  BoosterHandle h = nullptr;
  check(XGBoosterCreate(nullptr, 0, &h), "create a booster");
  Booster fresh(h);
  if (XGBoosterLoadModelFromBuffer(h, text.data(), text.size()) != 0)
    throw Error("cost model: cannot load " + path + ": " + xgboost_message());
  impl_->set_params(h);
  impl_->booster = std::move(fresh);
}

}  // namespace kiln::search
