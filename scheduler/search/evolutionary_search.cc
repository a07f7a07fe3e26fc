#include "scheduler/search/evolutionary_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <random>
#include <thread>
#include <unordered_map>
#include <utility>

#include "scheduler/sketch/init_rules.h"
#include "scheduler/sketch/mutation_rules.h"
#include "scheduler/sketch/random_program.h"
#include "scheduler/sketch/seed_programs.h"
#include "scheduler/sketch/sketch_rule.h"

namespace kiln::search {

using state::State;

namespace {

// Phases of a round, each with its own stream of per-item seeds. Generations use 0..generations-1.
constexpr uint64_t kPhaseInitSample = 1u << 20;  // + attempt
constexpr uint64_t kPhaseEpsRandom = 1u << 21;

// The score of a program that does not lower: below any prediction, never selected or proposed.
constexpr double kInvalidScore = -std::numeric_limits<double>::infinity();

// SplitMix64's finalizer: consecutive inputs give unrelated outputs, so seeds built from small
// counters (round, generation, index) do not correlate the generators they seed.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The seed of one item of one phase of one round: what makes the result independent of which thread
// draws the item and in which order.
uint64_t item_seed(uint64_t seed, uint64_t round, uint64_t phase, uint64_t index) {
  return mix(mix(mix(mix(seed) ^ round) ^ phase) ^ index);
}

unsigned thread_count(int requested, size_t items) {
  unsigned n = requested > 0 ? static_cast<unsigned>(requested) : std::max(1u, std::thread::hardware_concurrency());
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(n, items)));
}

// Runs body(i) for i in [0, n) on up to `threads` threads. Items must be independent: each writes only
// its own output slot. The first exception thrown by an item is rethrown here after all threads join.
template <typename Body>
void parallel_for(size_t n, int threads, const Body& body) {
  if (n == 0) return;
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  auto worker = [&] {
    for (size_t i = next++; i < n && !failed; i = next++) {
      try {
        body(i);
      } catch (...) {
        if (!failed.exchange(true)) error = std::current_exception();
      }
    }
  };
  const unsigned t = thread_count(threads, n);
  std::vector<std::thread> pool;
  for (unsigned k = 1; k < t; ++k) pool.emplace_back(worker);
  worker();
  for (std::thread& th : pool) th.join();
  if (error) std::rethrow_exception(error);
}

// Features of the programs of the current generation, by program identity: copies of a State share
// their data, and selection copies parents unchanged (1 - mutation_prob of the time, and when a mutation
// fails), so a program is lowered once however often it is copied. Entries hold their State, so the
// identity (the address of the shared data) cannot be reused while the entry lives.
class FeatureCache {
 public:
  // The rows of every program of `pop` (nullopt when it does not lower), extracted in parallel for the
  // programs not seen in the previous call; entries of programs no longer in `pop` are dropped.
  std::vector<const std::optional<ProgramFeatures>*> rows(const std::vector<State>& pop, int threads) {
    std::unordered_map<const void*, Entry> next;
    std::vector<const State*> todo;
    for (const State& s : pop) {
      const void* id = identity(s);
      if (next.count(id)) continue;
      auto old = entries_.find(id);
      if (old != entries_.end()) {
        next.emplace(id, std::move(old->second));
      } else {
        next.emplace(id, Entry{s, std::nullopt});
        todo.push_back(&s);
      }
    }
    parallel_for(todo.size(), threads, [&](size_t i) {
      Entry& e = next.at(identity(*todo[i]));  // distinct entries per item: no two threads write one
      try {
        e.features = state_features(e.state);
      } catch (const state::ScheduleError&) {
        e.features.reset();
      }
    });
    entries_ = std::move(next);
    std::vector<const std::optional<ProgramFeatures>*> out;
    for (const State& s : pop) out.push_back(&entries_.at(identity(s)).features);
    return out;
  }

 private:
  struct Entry {
    State state;
    std::optional<ProgramFeatures> features;
  };
  static const void* identity(const State& s) { return &s.stages(); }
  std::unordered_map<const void*, Entry> entries_;
};

// The model's scores of a population. Features are extracted only when the model reads them; a
// program that fails to lower then scores kInvalidScore instead of reaching the model.
std::vector<double> score_population(const std::vector<State>& pop, CostModel& model, FeatureCache& cache,
                                     int threads) {
  std::vector<ProgramFeatures> valid;
  std::vector<size_t> valid_index;
  if (model.wants_features()) {
    const auto rows = cache.rows(pop, threads);
    for (size_t i = 0; i < pop.size(); ++i) {
      if (!*rows[i]) continue;
      valid.push_back(**rows[i]);
      valid_index.push_back(i);
    }
  } else {
    valid.resize(pop.size());
    for (size_t i = 0; i < pop.size(); ++i) valid_index.push_back(i);
  }
  std::vector<double> scores(pop.size(), kInvalidScore);
  if (valid.empty()) return scores;
  std::vector<double> predicted = model.predict(valid);
  if (predicted.size() != valid.size())
    throw Error(fmt::format("search: the cost model returned {} scores for {} programs", predicted.size(), valid.size()));
  for (size_t k = 0; k < valid.size(); ++k)
    scores[valid_index[k]] = std::isnan(predicted[k]) ? kInvalidScore : predicted[k];
  return scores;
}

// The best-predicted programs not seen before, at most `capacity`, one per printed loop nest. Ordered
// by score, then by print, so ties break the same way on every run.
class BestPrograms {
 public:
  explicit BestPrograms(size_t capacity) : capacity_(capacity) {}

  // Whether a program of this score could enter (the set is not full or it beats the worst).
  bool admits(double score) const {
    if (!(score > kInvalidScore)) return false;
    return order_.size() < capacity_ || score > std::prev(order_.end())->first;
  }

  void insert(const State& s, std::string key, double score) {
    if (!admits(score) || programs_.count(key)) return;
    order_.emplace(score, key);
    programs_.emplace(std::move(key), s);
    if (order_.size() > capacity_) {
      auto worst = std::prev(order_.end());
      programs_.erase(worst->second);
      order_.erase(worst);
    }
  }

  // Best first.
  std::vector<std::pair<std::string, State>> ranked() const {
    std::vector<std::pair<std::string, State>> out;
    for (const auto& [score, key] : order_) out.emplace_back(key, programs_.at(key));
    return out;
  }

 private:
  struct Better {
    bool operator()(const std::pair<double, std::string>& a, const std::pair<double, std::string>& b) const {
      if (a.first != b.first) return a.first > b.first;
      return a.second < b.second;
    }
  };
  size_t capacity_;
  std::set<std::pair<double, std::string>, Better> order_;
  std::unordered_map<std::string, State> programs_;
};

// Offers a scored population to `best`. Programs are visited in score order and printed (the costly
// part) in parallel chunks only while they can still enter, so a generation prints a few hundred
// programs, not thousands.
void offer_population(const std::vector<State>& pop, const std::vector<double>& scores,
                      const std::set<std::string>& seen, BestPrograms& best, size_t chunk, int threads) {
  std::vector<size_t> order(pop.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  for (size_t begin = 0; begin < order.size(); begin += chunk) {
    const size_t end = std::min(order.size(), begin + chunk);
    if (!best.admits(scores[order[begin]])) return;
    std::vector<std::string> keys(end - begin);
    parallel_for(end - begin, threads, [&](size_t k) { keys[k] = state::print_state(pop[order[begin + k]]); });
    for (size_t k = 0; k < keys.size(); ++k) {
      const size_t i = order[begin + k];
      if (!best.admits(scores[i])) return;
      if (!seen.count(keys[k])) best.insert(pop[i], std::move(keys[k]), scores[i]);
    }
  }
}

// Roulette-wheel selection: a parent drawn with probability proportional to its (non-negative) score;
// uniformly when no score is positive.
class Roulette {
 public:
  explicit Roulette(const std::vector<double>& scores) {
    double total = 0;
    for (double s : scores) {
      total += std::isfinite(s) && s > 0 ? s : 0.0;
      prefix_.push_back(total);
    }
    if (total <= 0)
      for (size_t i = 0; i < prefix_.size(); ++i) prefix_[i] = static_cast<double>(i + 1);
  }
  size_t draw(sketch::Rng& rng) const {
    const double u = std::uniform_real_distribution<double>(0, prefix_.back())(rng);
    const size_t i = static_cast<size_t>(std::upper_bound(prefix_.begin(), prefix_.end(), u) - prefix_.begin());
    return std::min(i, prefix_.size() - 1);
  }

 private:
  std::vector<double> prefix_;
};

}  // namespace

TaskSearch::TaskSearch(std::string task_key, std::shared_ptr<const te::ComputeDAG> dag, sketch::SearchParams params,
                       SearchOptions options, uint64_t seed)
    : key_(std::move(task_key)), dag_(std::move(dag)), params_(params), options_(options), seed_(seed) {
  sketches_ = sketch::generate_sketches(State(dag_), params_);
  if (sketches_.empty()) throw state::ScheduleError(fmt::format("search: task {} has no sketch", key_));
  for (State& s : sketch::register_tile_seeds(sketches_, params_)) {
    std::string key = state::print_state(s);
    seeds_.push_back({std::move(s), std::move(key)});
  }
}

std::optional<State> TaskSearch::best_state() const {
  for (const Measured& m : measured_)
    if (m.cost_s == best_cost_ && std::isfinite(m.cost_s)) return m.state;
  return std::nullopt;
}

std::vector<State> TaskSearch::best_states(size_t k) const {
  std::vector<const Measured*> valid;
  for (const Measured& m : measured_)
    if (std::isfinite(m.cost_s)) valid.push_back(&m);
  std::stable_sort(valid.begin(), valid.end(), [](const Measured* a, const Measured* b) { return a->cost_s < b->cost_s; });
  std::vector<State> out;
  std::set<std::string> nests;
  for (const Measured* m : valid) {
    if (out.size() >= k) break;
    if (nests.insert(state::print_state(m->state)).second) out.push_back(m->state);
  }
  return out;
}

void TaskSearch::add_measured(const State& s, double cost_s) {
  seen_.insert(state::print_state(s));
  measured_.push_back({s, cost_s});
  if (std::isfinite(cost_s) && cost_s < best_cost_) best_cost_ = cost_s;
}

std::vector<TaskSearch::Program> TaskSearch::sample_init_population() const {
  // Random programs, one per printed nest. A few more draws when most are already known, as the space
  // of a small task runs out.
  const size_t want = static_cast<size_t>(std::max(1, options_.init_min_population));
  std::vector<Program> out;
  std::set<std::string> keys;
  size_t unseen = 0;
  for (uint64_t attempt = 0; attempt < 4 && unseen < want; ++attempt) {
    std::vector<std::optional<Program>> drawn(want);
    parallel_for(want, options_.threads, [&](size_t i) {
      sketch::Rng rng(item_seed(seed_, round_, kPhaseInitSample + attempt, i));
      try {
        State s = sketch::sample_program(sketches_, params_, rng);
        std::string key = state::print_state(s);
        drawn[i] = Program{std::move(s), std::move(key)};
      } catch (const state::ScheduleError&) {
      }
    });
    for (auto& p : drawn) {
      if (!p || !keys.insert(p->key).second) continue;
      unseen += !seen_.count(p->key);
      out.push_back(std::move(*p));
    }
  }
  return out;
}

std::vector<State> TaskSearch::search_round(CostModel& model, int n) {
  const int threads = options_.threads;
  const size_t population = static_cast<size_t>(std::max(1, options_.population));
  std::vector<Program> init = sample_init_population();

  // Generation 0: the random programs, the seeds and the fastest measured ones.
  std::vector<State> pop;
  for (const Program& p : init) pop.push_back(p.state);
  for (const Program& p : seeds_) pop.push_back(p.state);
  std::vector<const Measured*> fastest;
  for (const Measured& m : measured_)
    if (std::isfinite(m.cost_s)) fastest.push_back(&m);
  std::stable_sort(fastest.begin(), fastest.end(), [](const Measured* a, const Measured* b) { return a->cost_s < b->cost_s; });
  const size_t n_measured = std::min(fastest.size(), static_cast<size_t>(std::lround(options_.measured_seed_ratio * static_cast<double>(population))));
  for (size_t i = 0; i < n_measured; ++i) pop.push_back(fastest[i]->state);

  const size_t capacity = 2 * static_cast<size_t>(n);
  BestPrograms best(capacity);
  FeatureCache features;
  for (int gen = 0; !pop.empty(); ++gen) {
    const std::vector<double> scores = score_population(pop, model, features, threads);
    offer_population(pop, scores, seen_, best, capacity, threads);
    if (gen >= options_.generations) break;
    // The next generation: parents drawn by score, most of them mutated (Ansor on CPU: no crossover).
    const Roulette roulette(scores);
    std::vector<State> next(population);
    parallel_for(population, threads, [&](size_t i) {
      sketch::Rng rng(item_seed(seed_, round_, static_cast<uint64_t>(gen), i));
      const State& parent = pop[roulette.draw(rng)];
      next[i] = parent;
      if (std::uniform_real_distribution<double>(0, 1)(rng) < options_.mutation_prob)
        if (auto child = sketch::mutate(parent, params_, rng)) next[i] = std::move(*child);
    });
    pop = std::move(next);
  }

  // Eps-greedy: most of the batch by prediction, a few random programs so that a wrong model cannot
  // hide part of the space forever.
  const size_t want = static_cast<size_t>(n);
  const size_t want_random = std::min(want, static_cast<size_t>(std::lround(static_cast<double>(n) * options_.eps_greedy)));
  std::vector<std::pair<std::string, State>> ranked = best.ranked();
  std::vector<const Program*> random;
  for (const Program& p : init)
    if (!seen_.count(p.key)) random.push_back(&p);
  sketch::Rng rng(item_seed(seed_, round_, kPhaseEpsRandom, 0));
  std::shuffle(random.begin(), random.end(), rng);

  std::set<std::string> picked;
  std::vector<State> batch;
  auto take = [&](const std::string& key, const State& s) {
    if (batch.size() < want && !seen_.count(key) && picked.insert(key).second) batch.push_back(s);
  };
  // Seeds not measured yet go first, a share of the batch per round.
  const size_t want_seeds = std::max<size_t>(1, static_cast<size_t>(std::lround(static_cast<double>(n) * options_.seed_share)));
  for (const Program& p : seeds_)
    if (batch.size() < want_seeds) take(p.key, p.state);
  const size_t n_best = want - std::min(want - batch.size(), std::min(want_random, random.size()));
  for (size_t i = 0; i < ranked.size() && batch.size() < n_best; ++i) take(ranked[i].first, ranked[i].second);
  for (const Program* p : random) take(p->key, p->state);  // the eps share, or more when few are predicted
  for (const auto& [key, s] : ranked) take(key, s);  // too few random ones: more predicted ones
  seen_.insert(picked.begin(), picked.end());
  return batch;
}

std::vector<State> TaskSearch::next_batch(CostModel& model, int n) {
  if (n <= 0 || exhausted_) return {};
  // A round that finds nothing new may have been unlucky; a second one with fresh seeds decides.
  for (int attempt = 0; attempt < 2; ++attempt) {
    // The round's random choices follow from the number of programs measured so far rather than from
    // a counter of this object's rounds, so a search resumed from records proposes what the
    // interrupted one would have.
    round_ = 2 * static_cast<uint64_t>(measured_.size()) + static_cast<uint64_t>(attempt);
    std::vector<State> batch = search_round(model, n);
    if (!batch.empty()) return batch;
  }
  exhausted_ = true;
  return {};
}

}  // namespace kiln::search
