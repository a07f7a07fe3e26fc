/// \file TASO's cost-based backtracking search over graph substitutions (issue 20, point 5).
///
/// Why a search and not greedy rewriting: a substitution that makes a graph slower can enable one
/// that makes it much faster (enlarging a 1x1 conv costs arithmetic, and then lets it merge with a
/// 3x3 conv of the same input). As TASO's algorithm 2 does, graphs wait in a queue ordered by cost;
/// the cheapest is expanded by every match of every rule, and a rewrite joins the queue when the
/// graph it makes costs less than alpha times the best graph so far, so rewrites that cost a little
/// are still explored. A rewrite is ranked by its cost change alone (graph_match.h's cost_change) and
/// applied only when the search takes it, when a canonical hash that ignores value names and the
/// order of commutative inputs skips graphs seen before: most rewrites of a large model are never
/// taken, and making each graph would cost more than the rest of the search. The search stops when
/// the queue is empty or after `budget` expansions. The result carries the rewrites that
/// led to the best graph, in order: a log that `kiln dump --dump-after=subst` prints and that
/// replay_rewrites applies again to the input graph.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "frontend/ir/graph.h"
#include "frontend/subst/graph_cost.h"
#include "frontend/subst/rule.h"

namespace kiln::subst {

struct SearchOptions {
  double alpha = 1.05;  // TASO's relaxation: graphs up to 5% costlier than the best stay in the search
  int budget = 200;     // graphs expanded at most
  /// The cheapest graph found is kept only when it is cheaper than the input by this fraction of
  /// the input's cost; otherwise the input is.
  /// The estimate does not resolve smaller differences (the roofline's 1 us per kernel is a guess;
  /// records are noisy), and a rewrite is a risk of its own (new tasks, other fusions): BERT-base's
  /// query/key/value merges, 0.02% cheaper by the roofline, measured 1-2% slower.
  double min_gain = 0.005;
  Roofline cost;        // ranks rewrites before their graphs are made
  /// When set, the cost of each graph the search takes (the input graph's too) instead of its
  /// roofline: tuning records' latencies (toolchain/subst_costs.h).
  std::function<double(const Graph&)> measured;
};

/// One applied substitution: the rule, and the values its lhs outputs matched (which the rewrite
/// recomputes under the same names).
struct Rewrite {
  std::string rule;            // Rule::name
  std::vector<std::string> roots;
  double cost_before = 0, cost_after = 0;  // estimated seconds of the whole graph
};

struct SearchResult {
  Graph graph;
  std::vector<Rewrite> log;    // from the input graph to `graph`
  double initial_cost = 0, final_cost = 0;
  int64_t expanded = 0;        // graphs taken from the queue
  int64_t generated = 0;       // rewrites queued (within alpha of the best)
  int64_t failed = 0;          // rewrites taken whose graph failed TASO's cycle or shape checks
  int64_t repeated = 0;        // rewrites taken whose graph had been seen
  double seconds = 0;          // the search's wall time
};

/// The graph of a model before fusion (after constant folding and batch-norm folding), searched with
/// `rules`.
SearchResult optimize_graph_substitutions(const Graph& g, const std::vector<Rule>& rules, const SearchOptions& o);

/// `log`'s rewrites applied to `g` again, in order, each at the roots it names (rules found by name in
/// `rules`). Throws Error naming the rewrite that no longer matches.
Graph replay_rewrites(const Graph& g, const std::vector<Rule>& rules, const std::vector<Rewrite>& log);

/// The rules the optimizer uses by default: merge_rules(), sum_rules() and verified_rules().
const std::vector<Rule>& default_rules();

/// A hash of `g`'s computation that ignores value names and node order (constants by shape and a
/// sample of their contents).
uint64_t canonical_hash(const Graph& g);

/// "3 rewrites, 12.1 ms -> 10.4 ms (...)" and one line per rewrite: what the subst stage dumps.
std::string format_rewrites(const SearchResult& r);

}  // namespace kiln::subst
