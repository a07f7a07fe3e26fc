/// \file The search within one task (Ansor's SketchPolicy): sketches of the task, random programs from
/// them, evolution guided by the cost model, and the choice of the next programs to measure.
///
/// A round starts from a population of random programs plus the best measured ones, evolves it for a
/// few generations (mutations and crossover-free selection by predicted score, as Ansor on CPU), and
/// returns the best predicted programs not measured before, with a few random ones mixed in
/// (eps-greedy) so a wrong model cannot hide part of the space forever. Programs are deduplicated by
/// their printed loop nest (state::print_state). Unlike Ansor, the population also holds a few
/// register-tile seeds (sketch/seed_programs.h), and each batch measures some of them until all are. All randomness comes from the task's seeded generator
/// and per-item seeds derived from it, so a seed reproduces the same candidates whatever the threads.
#pragma once
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "scheduler/search/cost_model.h"
#include "scheduler/sketch/search_params.h"
#include "scheduler/state/state.h"
#include "scheduler/te/compute.h"

namespace kiln::search {

/// Ansor's defaults (TVM's SketchPolicy parameters).
struct SearchOptions {
  int population = 2048;             ///< evolutionary_search_population
  int generations = 4;               ///< evolutionary_search_num_iters
  double mutation_prob = 0.85;       ///< evolutionary_search_mutation_prob
  double eps_greedy = 0.05;          ///< share of each batch drawn at random
  int init_min_population = 50;      ///< sample_init_min_population: random programs per round
  double measured_seed_ratio = 0.2;  ///< sample_init_use_measured_ratio: best measured states as seeds
  int threads = 0;                   ///< sampling, mutation and feature extraction; 0 = all cores
  /// kiln, not Ansor: the share of each batch given to register-tile seeds not measured yet
  /// (sketch/seed_programs.h), at least one while any is left.
  double seed_share = 0.25;
};

class TaskSearch {
 public:
  /// Generates the task's sketches. Throws state::ScheduleError when the task has none.
  TaskSearch(std::string task_key, std::shared_ptr<const te::ComputeDAG> dag, sketch::SearchParams params,
             SearchOptions options, uint64_t seed);

  /// Up to `n` programs of this task that were neither measured nor proposed before: the best predicted
  /// by `model` and round(n x eps_greedy) random ones. Fewer (possibly none) when the space seems
  /// exhausted. Programs returned are remembered as proposed. A round calls model.predict once per
  /// generation plus once for the initial population; when a round finds nothing new a second one
  /// (fresh seeds) runs before the task is declared exhausted.
  std::vector<state::State> next_batch(CostModel& model, int n);

  /// Records the measured cost of a program (infinity when it failed), whether proposed by this search
  /// or read back from records. Its printed loop nest is never proposed again.
  void add_measured(const state::State& s, double cost_s);

  const std::string& task_key() const { return key_; }
  const std::shared_ptr<const te::ComputeDAG>& dag() const { return dag_; }
  const std::vector<state::State>& sketches() const { return sketches_; }
  size_t num_measured() const { return measured_.size(); }
  /// Seconds of the fastest valid measured program; infinity when none.
  double best_cost() const { return best_cost_; }
  std::optional<state::State> best_state() const;
  /// The `k` fastest valid measured programs, fastest first, one per loop nest.
  std::vector<state::State> best_states(size_t k) const;
  /// True after a round found nothing new to propose.
  bool exhausted() const { return exhausted_; }

 private:
  struct Measured {
    state::State state;
    double cost_s;
  };
  /// A program with its printed loop nest (the dedup key).
  struct Program {
    state::State state;
    std::string key;
  };
  /// Random programs of this round, one per printed nest (some may have been seen already).
  std::vector<Program> sample_init_population() const;
  /// One round: sampling, evolution, eps-greedy pick. Marks the picked programs as proposed.
  std::vector<state::State> search_round(CostModel& model, int n);

  std::string key_;
  std::shared_ptr<const te::ComputeDAG> dag_;
  sketch::SearchParams params_;
  SearchOptions options_;
  uint64_t seed_;
  uint64_t round_ = 0;
  std::vector<state::State> sketches_;
  std::vector<Program> seeds_;  // register-tile seeds, most default-like first
  std::vector<Measured> measured_;
  std::set<std::string> seen_;  // printed loop nests measured or proposed
  double best_cost_ = std::numeric_limits<double>::infinity();
  bool exhausted_ = false;
};

}  // namespace kiln::search
