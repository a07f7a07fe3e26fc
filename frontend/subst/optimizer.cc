#include "frontend/subst/optimizer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "frontend/ir/error.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/passes/remove_dead_nodes.h"
#include "frontend/subst/graph_match.h"

namespace kiln::subst {
namespace {

struct Hasher {
  uint64_t h = 1469598103934665603ull;
  void mix(uint64_t v) {
    for (int i = 0; i < 8; ++i, v >>= 8) h = (h ^ (v & 0xff)) * 1099511628211ull;
  }
  void mix(const std::string& s) {
    mix(s.size());
    for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  }
  void mix_double(double d) { mix(static_cast<uint64_t>(std::llround(d * 1e6))); }
};

// A constant by its dtype, shape and up to 64 of its elements spread through it: enough to tell the
// weights of one model apart without reading all of them for every graph.
uint64_t constant_hash(const Tensor& t) {
  Hasher h;
  h.mix(static_cast<uint64_t>(t.dtype()));
  for (int64_t d : t.shape()) h.mix(static_cast<uint64_t>(d));
  const int64_t n = t.size(), step = std::max<int64_t>(1, n / 64);
  for (int64_t i = 0; i < n; i += step) h.mix_double(t.get_double(i));
  return h.h;
}

void mix_attr(Hasher& h, const AttrValue& v) {
  h.mix(static_cast<uint64_t>(v.index()));
  if (const auto* i = std::get_if<int64_t>(&v)) h.mix(static_cast<uint64_t>(*i));
  else if (const auto* d = std::get_if<double>(&v)) h.mix_double(*d);
  else if (const auto* s = std::get_if<std::string>(&v)) h.mix(*s);
  else if (const auto* t = std::get_if<Tensor>(&v)) h.mix(constant_hash(*t));
  else if (const auto* is = std::get_if<std::vector<int64_t>>(&v)) {
    for (int64_t x : *is) h.mix(static_cast<uint64_t>(x));
  } else if (const auto* ds = std::get_if<std::vector<double>>(&v)) {
    for (double x : *ds) h.mix_double(x);
  } else if (const auto* ss = std::get_if<std::vector<std::string>>(&v)) {
    for (const std::string& x : *ss) h.mix(x);
  }
}

bool commutative(const Node& n) {
  static const std::set<std::string> ops = {"Add", "Mul", "Max", "Min", "Sum", "Mean"};
  return n.domain.empty() && ops.count(n.op_type);
}

// A rewrite waiting in the search's queue: `rule` at `match` of `parent`, costing about `cost` (the
// parent's cost and the rewrite's cost_change); applied when it is taken from the queue. The first
// entry is the input graph itself (no rule).
struct Pending {
  double cost = 0;
  std::shared_ptr<const Graph> parent;
  const Rule* rule = nullptr;
  Match match;
  std::shared_ptr<const std::vector<Rewrite>> log;  // of the parent
  double parent_cost = 0;
};

struct CostlierFirst {
  bool operator()(const Pending& a, const Pending& b) const { return a.cost > b.cost; }
};

int count_ops(const TermRef& t) {
  int n = t->op == "leaf" ? 0 : 1;
  for (const TermRef& a : t->args) n += count_ops(a);
  return n;
}

// Constants' hashes by tensor: the graphs of one search share their constants, so each is read once.
// The cache holds the tensors, so an address is never reused while it is cached.
class ConstantHashes {
 public:
  uint64_t of(const std::shared_ptr<const Tensor>& t) {
    auto [it, fresh] = hashes_.try_emplace(t.get(), 0);
    if (fresh) {
      it->second = constant_hash(*t);
      kept_.push_back(t);
    }
    return it->second;
  }

 private:
  std::unordered_map<const Tensor*, uint64_t> hashes_;
  std::vector<std::shared_ptr<const Tensor>> kept_;
};

uint64_t graph_hash(const Graph& g, ConstantHashes& constants) {
  std::unordered_map<std::string, uint64_t> value_hash;
  auto of = [&](const std::string& v) -> uint64_t {
    if (v.empty()) return 0;
    if (auto it = value_hash.find(v); it != value_hash.end()) return it->second;
    const Value& value = g.value(v);
    Hasher h;
    if (value.constant) h.mix(constants.of(value.constant));
    else h.mix("input " + v);  // a graph input keeps its name
    return value_hash[v] = h.h;
  };
  for (const Node& n : g.nodes) {
    std::vector<uint64_t> ins;
    for (const std::string& in : n.inputs) ins.push_back(of(in));
    if (commutative(n)) std::sort(ins.begin(), ins.end());
    Hasher h;
    h.mix(n.domain + "." + n.op_type);
    for (uint64_t i : ins) h.mix(i);
    for (const auto& [name, a] : n.attrs) {
      h.mix(name);
      mix_attr(h, a);
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      Hasher out = h;
      out.mix(k);
      if (!n.outputs[k].empty()) value_hash[n.outputs[k]] = out.h;
    }
  }
  Hasher h;
  for (const std::string& o : g.outputs) h.mix(of(o));
  return h.h;
}

// `t` with the arguments of ewadd and ewmul in text order: the matcher tries both orders of these,
// so rules that differ only there find the same matches.
TermRef commuted(const TermRef& t) {
  if (t->op == "leaf") return t;
  auto c = std::make_shared<Term>(*t);
  for (TermRef& a : c->args) a = commuted(a);
  if (c->op == "ewadd" || c->op == "ewmul")
    std::sort(c->args.begin(), c->args.end(), [](const TermRef& a, const TermRef& b) { return to_string(a) < to_string(b); });
  return c;
}

}  // namespace

uint64_t canonical_hash(const Graph& g) {
  ConstantHashes constants;
  return graph_hash(g, constants);
}

const std::vector<Rule>& default_rules() {
  static const std::vector<Rule> rules = [] {
    std::vector<Rule> out = merge_rules();
    out.insert(out.end(), sum_rules().begin(), sum_rules().end());
    // Of the verified single-output rules, those that do not add operators (the ones that add some,
    // relu(x) to relu(relu(x)), only ever lead back, and each costs the search time per match), once
    // up to the order of ewadd's and ewmul's arguments, and not those whose sides differ only in
    // that order (ewadd(x, y) = ewadd(y, x)): the matcher tries both orders and the graph hash
    // ignores them, so such a rewrite only ever leads to a graph seen before, built in vain.
    std::set<std::string> kept;
    for (const Rule& r : verified_rules()) {
      const std::string lhs = to_string(commuted(r.lhs[0])), rhs = to_string(commuted(r.rhs[0]));
      if (count_ops(r.rhs[0]) <= count_ops(r.lhs[0]) && lhs != rhs && kept.insert(lhs + " = " + rhs).second) out.push_back(r);
    }
    return out;
  }();
  return rules;
}

SearchResult optimize_graph_substitutions(const Graph& g, const std::vector<Rule>& rules, const SearchOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  SearchResult r;
  const auto cost_of = [&](const Graph& x) { return o.measured ? o.measured(x) : graph_cost(x, o.cost); };
  r.initial_cost = cost_of(g);
  auto best = std::make_shared<const Graph>(g);
  double best_cost = r.initial_cost;
  std::vector<Rewrite> best_log;
  std::priority_queue<Pending, std::vector<Pending>, CostlierFirst> queue;
  Pending input;  // the input graph itself: no rule to apply
  input.cost = input.parent_cost = r.initial_cost;
  input.parent = best;
  input.log = std::make_shared<const std::vector<Rewrite>>();
  queue.push(std::move(input));
  ConstantHashes constants;
  std::set<uint64_t> seen;
  while (!queue.empty() && r.expanded < o.budget) {
    Pending p = queue.top();
    queue.pop();
    if (p.cost > o.alpha * best_cost) break;  // the queue holds nothing cheaper
    // The rewrite, made now that the search takes it (TASO's cycle and shape checks in apply_match).
    std::shared_ptr<const Graph> graph = p.parent;
    auto log = p.log;
    double cost = p.cost;
    if (p.rule) {
      std::optional<Graph> next = apply_match(*p.parent, *p.rule, p.match, /*fold=*/false);
      if (!next) {
        ++r.failed;
        continue;
      }
      graph = std::make_shared<const Graph>(std::move(*next));
      cost = cost_of(*graph);
      auto extended = std::make_shared<std::vector<Rewrite>>(*p.log);
      extended->push_back({p.rule->name, p.match.roots, p.parent_cost, cost});
      log = extended;
    }
    if (!seen.insert(graph_hash(*graph, constants)).second) {
      ++r.repeated;
      continue;
    }
    if (cost < best_cost) {
      best = graph;
      best_cost = cost;
      best_log = *log;
    }
    ++r.expanded;
    const GraphReaders readers(*graph);
    for (auto& [index, m] : find_all_matches(*graph, readers, rules)) {
      const std::optional<double> change = cost_change(*graph, readers, rules[index], m, o.cost);
      if (!change || cost + *change >= o.alpha * best_cost) continue;
      ++r.generated;
      queue.push({cost + *change, graph, &rules[index], std::move(m), log, cost});
    }
  }
  if (best_cost > (1 - o.min_gain) * r.initial_cost) {  // within the estimate's resolution: kept as it was
    best = std::make_shared<const Graph>(g);
    best_cost = r.initial_cost;
    best_log.clear();
  }
  r.graph = *best;
  infer_shapes(r.graph);  // the kept graph's new weights folded
  remove_dead_nodes(r.graph);
  r.log = best_log;
  r.final_cost = best_cost;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

Graph replay_rewrites(const Graph& g, const std::vector<Rule>& rules, const std::vector<Rewrite>& log) {
  Graph out = g;
  for (const Rewrite& w : log) {
    auto rule = std::find_if(rules.begin(), rules.end(), [&](const Rule& r) { return r.name == w.rule; });
    if (rule == rules.end()) throw Error("subst replay: no rule '" + w.rule + "'");
    std::optional<Graph> next;
    for (const Match& m : find_matches(out, *rule))
      if (m.roots == w.roots && (next = apply_match(out, *rule, m))) break;
    if (!next) throw Error("subst replay: rule '" + w.rule + "' no longer applies at " + w.roots.front());
    out = std::move(*next);
  }
  return out;
}

std::string format_rewrites(const SearchResult& r) {
  std::string s = fmt::format(
      "{} rewrites, estimated {:.3f} ms -> {:.3f} ms ({} graphs expanded, {} generated, {} failed, {} seen before, {:.2f} s)\n",
      r.log.size(), r.initial_cost * 1e3, r.final_cost * 1e3, r.expanded, r.generated, r.failed, r.repeated, r.seconds);
  for (const Rewrite& w : r.log) {
    std::string roots;
    for (const std::string& v : w.roots) roots += (roots.empty() ? "" : ", ") + v;
    s += fmt::format("  {} at {}: {:.3f} ms -> {:.3f} ms\n", w.rule, roots, w.cost_before * 1e3, w.cost_after * 1e3);
  }
  return s;
}

}  // namespace kiln::subst
