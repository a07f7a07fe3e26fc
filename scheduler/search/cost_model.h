/// \file The cost model of the search: predicts which of many unmeasured programs are fastest, so that
/// only the most promising few are built and timed.
///
/// As Ansor: a program's score is the sum of per-store predictions ("pack-sum"), trained on normalised
/// throughput (the task's best measured cost / the program's cost, so 1 is the best seen and failures are
/// 0) weighted by itself, so the model is most accurate on the fast programs the search cares about. One
/// model serves every task (the features are shape-independent), and it is retrained from all samples
/// each round. Until it has seen enough samples it predicts random scores.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "scheduler/search/features.h"

namespace kiln::search {

/// One measured program: its task, features and seconds per run (infinity when it failed).
struct MeasuredSample {
  std::string task_key;
  ProgramFeatures features;
  double cost_s = 0;
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  /// Adds samples (every measured program of the round) and retrains.
  virtual void update(const std::vector<MeasuredSample>& samples) = 0;
  /// One score per program: higher is predicted faster. Scores only compare within one task.
  virtual std::vector<double> predict(const std::vector<ProgramFeatures>& programs) = 0;
  /// Samples seen so far.
  virtual size_t num_samples() const = 0;
  /// False while predictions ignore the features (random scores): the search then skips extracting them.
  virtual bool wants_features() const = 0;
};

/// The score of a program without feature rows (it did not lower, or has no store): below any prediction,
/// so the search never prefers it, yet finite, so sums and sorts of scores stay well defined.
inline constexpr double kNoFeaturesScore = -1e30;

/// Uniform random scores from a seeded generator: the search without a model (and its tests).
std::unique_ptr<CostModel> make_random_model(uint64_t seed);

struct XGBoostOptions {
  int warmup_samples = 64;  ///< below this many samples, predict random scores
  int threads = 0;          ///< XGBoost's threads; 0 = the cores of this machine
  uint64_t seed = 43;
  int max_rounds = 300;     ///< boosting rounds (stopped early when the training loss stalls)
};

/// The XGBoost model (libxgboost's C API, a custom pack-sum objective). Throws kiln::Error if XGBoost
/// reports an error.
///
/// Keeps every sample; each update() that leaves it with at least warmup_samples retrains a booster from
/// scratch on all of them. Labels are normalised throughput per task; a sample weighs its label with a
/// small floor, so failed programs (label 0) still teach the model a little. Until the first training (or
/// load) it predicts seeded random scores and wants_features() is false. A program with no rows scores
/// kNoFeaturesScore. Predictions are deterministic for a given seed, samples and thread count.
class XGBoostModel : public CostModel {
 public:
  explicit XGBoostModel(XGBoostOptions options = {});
  ~XGBoostModel() override;
  XGBoostModel(const XGBoostModel&) = delete;
  XGBoostModel& operator=(const XGBoostModel&) = delete;
  void update(const std::vector<MeasuredSample>& samples) override;
  std::vector<double> predict(const std::vector<ProgramFeatures>& programs) override;
  size_t num_samples() const override;
  bool wants_features() const override;
  /// Writes the trained booster (XGBoost's JSON model format, whatever the file is called); kiln::Error
  /// naming the path on failure or when nothing is trained yet.
  void save(const std::string& path) const;
  /// Reads a booster written by save(); it predicts at once (wants_features() becomes true). Samples are
  /// not part of the file: a resumed tuner re-adds them from its records. kiln::Error naming the path when
  /// the file is missing or not a model.
  void load(const std::string& path);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::search
