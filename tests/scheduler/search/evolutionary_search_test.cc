// The search within one task: batches of new distinct programs, never a program twice, reproducible
// from its seed whatever the thread count, and an end when a small task's space runs out.
#include "scheduler/search/evolutionary_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>
#include <string>

#include "scheduler/sketch/seed_programs.h"
#include "tests/scheduler/state/state_test_util.h"

namespace kiln {
namespace {

using search::CostModel;
using search::ProgramFeatures;
using search::SearchOptions;
using search::TaskSearch;
using state::State;
using state::testing::DagRef;

// Small populations: the tests check the mechanics, not the quality of the search.
SearchOptions small_options(int threads = 2) {
  SearchOptions o;
  o.population = 48;
  o.generations = 2;
  o.init_min_population = 16;
  o.threads = threads;
  return o;
}

std::vector<std::string> printed(const std::vector<State>& batch) {
  std::vector<std::string> out;
  for (const State& s : batch) out.push_back(state::print_state(s));
  return out;
}

std::string joined(const std::vector<State>& batch) {
  std::string out;
  for (const std::string& p : printed(batch)) out += p + "----\n";
  return out;
}

// B = max(A, 0) over 8x16 elements: nothing to tile, so the space is the parallel/vector/unroll choices
// of one loop nest (a single program with SearchParams' defaults).
DagRef tiny_relu_dag() {
  auto a = te::placeholder("A", DType::Float32, {8, 16});
  auto b = te::compute("B", "elementwise", DType::Float32, {8, 16},
                       [&](const std::vector<te::Expr>& i) { return te::max(te::at(a, i), te::float_imm(0.0)); });
  return state::testing::dag_of({b});
}

TEST(EvolutionarySearch, BatchIsNDistinctCompletePrograms) {
  TaskSearch search("matmul", state::testing::matmul_dag(), sketch::SearchParams{}, small_options(), 1);
  EXPECT_FALSE(search.sketches().empty());
  auto model = search::make_random_model(7);
  std::vector<State> batch = search.next_batch(*model, 16);
  ASSERT_EQ(batch.size(), 16u);
  std::vector<std::string> p = printed(batch);
  EXPECT_EQ(std::set<std::string>(p.begin(), p.end()).size(), 16u);
  for (const State& s : batch) EXPECT_FALSE(s.has_undefined_lengths());
  EXPECT_FALSE(search.exhausted());
  EXPECT_EQ(search.num_measured(), 0u);
}

TEST(EvolutionarySearch, RegisterTileSeedsLeadTheFirstBatches) {
  // A quarter of each batch of 16: the first batch opens with the first 4 seeds, the next with the
  // following 4, whatever the (random) model predicts.
  const sketch::SearchParams p;
  TaskSearch search("matmul", state::testing::matmul_dag(256, 128, 64), p, small_options(), 1);
  const std::vector<State> seeds = sketch::register_tile_seeds(search.sketches(), p);
  ASSERT_GE(seeds.size(), 8u);
  auto model = search::make_random_model(7);
  for (size_t round = 0; round < 2; ++round) {
    const std::vector<State> batch = search.next_batch(*model, 16);
    ASSERT_EQ(batch.size(), 16u);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(print_state(batch[i]), print_state(seeds[4 * round + i])) << round << " " << i;
  }
}

TEST(EvolutionarySearch, NeverProposesAMeasuredOrProposedProgramAgain) {
  TaskSearch search("conv", state::testing::conv_dag(), sketch::SearchParams{}, small_options(), 2);
  auto model = search::make_random_model(3);
  std::set<std::string> all;
  size_t total = 0;
  for (int round = 0; round < 4; ++round) {
    std::vector<State> batch = search.next_batch(*model, 12);
    total += batch.size();
    for (const std::string& p : printed(batch)) EXPECT_TRUE(all.insert(p).second) << "proposed twice:\n" << p;
    // Every other round is measured: measured programs seed the next population but are not proposed.
    if (round % 2 == 0)
      for (size_t i = 0; i < batch.size(); ++i) search.add_measured(batch[i], 1e-3 * static_cast<double>(i + 1));
  }
  EXPECT_EQ(total, 48u);
  EXPECT_EQ(search.num_measured(), 24u);
}

TEST(EvolutionarySearch, AMeasuredReplayedProgramIsNotProposed) {
  DagRef dag = state::testing::matmul_dag();
  auto first_batch = [&](TaskSearch& search) {
    auto model = search::make_random_model(11);
    return search.next_batch(*model, 8);
  };
  TaskSearch a("matmul", dag, sketch::SearchParams{}, small_options(), 5);
  std::vector<State> batch = first_batch(a);
  ASSERT_EQ(batch.size(), 8u);
  // The same program read back from records: a fresh replay of its steps, not the same object.
  TaskSearch b("matmul", dag, sketch::SearchParams{}, small_options(), 5);
  State replayed = state::replay(dag, batch[0].steps());
  b.add_measured(replayed, 2e-3);
  std::vector<std::string> again = printed(first_batch(b));
  EXPECT_EQ(std::count(again.begin(), again.end(), state::print_state(batch[0])), 0);
  // Everything else of the same seed may come back: only the measured program is blocked.
  EXPECT_EQ(again.size(), 8u);
}

TEST(EvolutionarySearch, BestCostAndStateFollowTheMeasurements) {
  TaskSearch search("matmul", state::testing::matmul_dag(), sketch::SearchParams{}, small_options(), 9);
  EXPECT_TRUE(std::isinf(search.best_cost()));
  EXPECT_FALSE(search.best_state().has_value());
  auto model = search::make_random_model(1);
  std::vector<State> batch = search.next_batch(*model, 4);
  ASSERT_EQ(batch.size(), 4u);
  const double inf = std::numeric_limits<double>::infinity();
  search.add_measured(batch[0], inf);
  EXPECT_TRUE(std::isinf(search.best_cost())) << "a failed program is not a best";
  EXPECT_FALSE(search.best_state().has_value());
  search.add_measured(batch[1], 3e-3);
  search.add_measured(batch[2], 1e-3);
  search.add_measured(batch[3], 2e-3);
  EXPECT_DOUBLE_EQ(search.best_cost(), 1e-3);
  ASSERT_TRUE(search.best_state().has_value());
  EXPECT_EQ(state::print_state(*search.best_state()), state::print_state(batch[2]));
  EXPECT_EQ(search.num_measured(), 4u);
}

std::string two_rounds(uint64_t seed, int threads, DagRef dag) {
  TaskSearch search("task", std::move(dag), sketch::SearchParams{}, small_options(threads), seed);
  auto model = search::make_random_model(21);
  std::string out = joined(search.next_batch(*model, 10));
  std::vector<State> measured = search.next_batch(*model, 10);
  for (size_t i = 0; i < measured.size(); ++i) search.add_measured(measured[i], 1e-3 * static_cast<double>(i + 1));
  return out + "====\n" + joined(measured) + "====\n" + joined(search.next_batch(*model, 10));
}

TEST(EvolutionarySearch, TheSeedFixesTheBatches) {
  const std::string a = two_rounds(4, 2, state::testing::matmul_dag());
  EXPECT_EQ(a, two_rounds(4, 2, state::testing::matmul_dag()));
  EXPECT_NE(a, two_rounds(5, 2, state::testing::matmul_dag()));
}

TEST(EvolutionarySearch, TheThreadCountDoesNotChangeTheBatches) {
  EXPECT_EQ(two_rounds(6, 1, state::testing::conv_dag()), two_rounds(6, 2, state::testing::conv_dag()));
  EXPECT_EQ(two_rounds(6, 1, state::testing::matmul_relu_dag()), two_rounds(6, 3, state::testing::matmul_relu_dag()));
}

// Proposes batches until the search says it is exhausted; returns how many distinct programs it saw.
size_t propose_until_exhausted(DagRef dag, int batch_size, int max_calls) {
  TaskSearch search("small", std::move(dag), sketch::SearchParams{}, small_options(), 3);
  auto model = search::make_random_model(2);
  std::set<std::string> all;
  int calls = 0;
  while (!search.exhausted() && calls < max_calls) {
    std::vector<State> batch = search.next_batch(*model, batch_size);
    ++calls;
    for (const std::string& p : printed(batch)) EXPECT_TRUE(all.insert(p).second) << "proposed twice:\n" << p;
    EXPECT_EQ(batch.empty(), search.exhausted());
  }
  EXPECT_TRUE(search.exhausted()) << all.size() << " programs in " << calls << " calls";
  EXPECT_LE(static_cast<size_t>(calls), all.size() + 1) << "every call but the last proposes something";
  EXPECT_TRUE(search.next_batch(*model, batch_size).empty());
  std::cout << "[ space ] " << all.size() << " programs in " << calls << " calls\n";
  return all.size();
}

TEST(EvolutionarySearch, ASmallTaskRunsOut) {
  EXPECT_EQ(propose_until_exhausted(tiny_relu_dag(), 8, 5), 1u);
  // A 1x2x1 matmul and a sum of 4: a few tilings each, found over several small batches.
  EXPECT_GE(propose_until_exhausted(state::testing::matmul_dag(1, 2, 1), 1, 20), 3u);
  EXPECT_GE(propose_until_exhausted(state::testing::row_reduce_dag(1, 4), 1, 20), 3u);
}

// Scores a fixed value per program, so the eps-greedy share is the only randomness left.
class ConstantModel : public CostModel {
 public:
  void update(const std::vector<search::MeasuredSample>&) override {}
  std::vector<double> predict(const std::vector<ProgramFeatures>& programs) override {
    ++calls;
    return std::vector<double>(programs.size(), 1.0);
  }
  size_t num_samples() const override { return 0; }
  bool wants_features() const override { return false; }
  int calls = 0;
};

TEST(EvolutionarySearch, EachGenerationIsScoredOnce) {
  SearchOptions o = small_options();
  TaskSearch search("matmul", state::testing::matmul_dag(), sketch::SearchParams{}, o, 8);
  ConstantModel model;
  EXPECT_EQ(search.next_batch(model, 20).size(), 20u);
  EXPECT_EQ(model.calls, o.generations + 1) << "the initial population and each evolved generation";
}

// Prefers programs whose vectorized loop has 16 lanes, as told by the features ("vec_len" of Ansor's
// layout, log2(1 + length)). Needs the real feature extraction: skipped where that feature is absent.
class VectorLengthModel : public CostModel {
 public:
  explicit VectorLengthModel(size_t column) : column_(column) {}
  void update(const std::vector<search::MeasuredSample>&) override {}
  std::vector<double> predict(const std::vector<ProgramFeatures>& programs) override {
    std::vector<double> out;
    for (const ProgramFeatures& rows : programs) {
      double best = 0;
      for (const auto& row : rows) best = std::max(best, 1.0 / (1.0 + std::abs(row.at(column_) - std::log2(17.0))));
      out.push_back(best);
    }
    return out;
  }
  size_t num_samples() const override { return 0; }
  bool wants_features() const override { return true; }

 private:
  size_t column_;
};

// Whether some loop of the printed nest is `vectorize <name> (0,16)`.
bool has_vector_loop_of_16(const std::string& printed_state) {
  std::istringstream lines(printed_state);
  for (std::string line; std::getline(lines, line);) {
    const size_t begin = line.find_first_not_of(' ');
    if (begin != std::string::npos && line.compare(begin, 10, "vectorize ") == 0 && line.find("(0,16)") != std::string::npos)
      return true;
  }
  return false;
}

double share_vectorized_16(const std::vector<State>& batch) {
  int hits = 0;
  for (const std::string& p : printed(batch)) hits += has_vector_loop_of_16(p);
  return batch.empty() ? 0 : static_cast<double>(hits) / static_cast<double>(batch.size());
}

TEST(EvolutionarySearch, TheModelSteersTheSearch) {
  const auto& names = search::feature_names();
  auto it = std::find(names.begin(), names.end(), "vec_len");
  ASSERT_NE(it, names.end()) << "no vec_len feature";
  SearchOptions o = small_options();
  o.population = 96;
  o.generations = 3;
  o.eps_greedy = 0;
  TaskSearch steered("matmul", state::testing::matmul_dag(256, 64, 256), sketch::SearchParams{}, o, 12);
  VectorLengthModel model(static_cast<size_t>(it - names.begin()));
  TaskSearch random("matmul", state::testing::matmul_dag(256, 64, 256), sketch::SearchParams{}, o, 12);
  auto random_model = search::make_random_model(12);
  const double with_model = share_vectorized_16(steered.next_batch(model, 16));
  const double without = share_vectorized_16(random.next_batch(*random_model, 16));
  EXPECT_GT(with_model, without) << "random: " << without;
  EXPECT_GE(with_model, 0.75);
}

}  // namespace
}  // namespace kiln
