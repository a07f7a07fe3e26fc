#include "frontend/subst/optimizer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <set>

#include <fmt/format.h>

#include "frontend/ir/error.h"
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

// A graph waiting in the search's queue.
struct Candidate {
  double cost = 0;
  std::shared_ptr<const Graph> graph;
  std::vector<Rewrite> log;
};

struct CostlierFirst {
  bool operator()(const Candidate& a, const Candidate& b) const { return a.cost > b.cost; }
};

int count_ops(const TermRef& t) {
  int n = t->op == "leaf" ? 0 : 1;
  for (const TermRef& a : t->args) n += count_ops(a);
  return n;
}

}  // namespace

uint64_t canonical_hash(const Graph& g) {
  std::map<std::string, uint64_t> value_hash;
  auto of = [&](const std::string& v) -> uint64_t {
    if (v.empty()) return 0;
    if (auto it = value_hash.find(v); it != value_hash.end()) return it->second;
    const Value& value = g.value(v);
    Hasher h;
    if (value.constant) h.mix(constant_hash(*value.constant));
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

std::vector<Rule> default_rules() {
  std::vector<Rule> rules = merge_rules();
  // Of the verified single-output rules, those that do not add operators: the ones that add some
  // (relu(x) to relu(relu(x))) only ever lead back, and each costs the search a graph per match.
  for (const Rule& r : verified_rules())
    if (count_ops(r.rhs[0]) <= count_ops(r.lhs[0])) rules.push_back(r);
  return rules;
}

SearchResult optimize_graph_substitutions(const Graph& g, const std::vector<Rule>& rules, const SearchOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  SearchResult r;
  r.initial_cost = graph_cost(g, o.cost);
  Candidate best{r.initial_cost, std::make_shared<const Graph>(g), {}};
  std::priority_queue<Candidate, std::vector<Candidate>, CostlierFirst> queue;
  queue.push(best);
  std::set<uint64_t> seen = {canonical_hash(g)};
  while (!queue.empty() && r.expanded < o.budget) {
    Candidate c = queue.top();
    queue.pop();
    if (c.cost > o.alpha * best.cost) break;  // the queue holds nothing cheaper
    ++r.expanded;
    for (const auto& [index, m] : find_all_matches(*c.graph, rules)) {
        const Rule& rule = rules[index];
        std::optional<Graph> next = apply_match(*c.graph, rule, m);
        if (!next || !seen.insert(canonical_hash(*next)).second) continue;
        ++r.generated;
        Candidate n{graph_cost(*next, o.cost), std::make_shared<const Graph>(std::move(*next)), c.log};
        n.log.push_back({rule.name, m.roots, c.cost, n.cost});
        if (n.cost < best.cost) best = n;
        if (n.cost < o.alpha * best.cost) queue.push(std::move(n));
      }
  }
  r.graph = *best.graph;
  r.log = best.log;
  r.final_cost = best.cost;
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
  std::string s = fmt::format("{} rewrites, estimated {:.3f} ms -> {:.3f} ms ({} graphs expanded, {} generated, {:.2f} s)\n",
                              r.log.size(), r.initial_cost * 1e3, r.final_cost * 1e3, r.expanded, r.generated, r.seconds);
  for (const Rewrite& w : r.log) {
    std::string roots;
    for (const std::string& v : w.roots) roots += (roots.empty() ? "" : ", ") + v;
    s += fmt::format("  {} at {}: {:.3f} ms -> {:.3f} ms\n", w.rule, roots, w.cost_before * 1e3, w.cost_after * 1e3);
  }
  return s;
}

}  // namespace kiln::subst
