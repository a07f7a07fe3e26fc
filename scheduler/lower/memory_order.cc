#include "scheduler/lower/memory_order.h"

#include <algorithm>
#include <map>
#include <set>

namespace kiln::lower {
namespace {

// A workspace buffer of the model: its bytes and the subgraphs that touch it.
struct Live {
  int64_t bytes = 0;
  std::vector<int> touched_by;
};

// A buffer a subgraph touches, from its statement `first` to `last` (counted within the subgraph).
struct Touch {
  size_t buffer;
  size_t first, last;
};

// A set of subgraphs run, in the best order found to it.
struct Partial {
  std::vector<uint64_t> done;  // one bit per subgraph
  std::vector<int> order;
  int64_t peak = 0;  // the most bytes live while any of them ran
  int64_t live = 0;  // bytes live after the last
};

bool has(const std::vector<uint64_t>& set, int k) { return (set[static_cast<size_t>(k) / 64] >> (k % 64)) & 1; }

class OrderModel {
 public:
  OrderModel(const ModelProgram& prog, const SubgraphDAG& sdag, int64_t align)
      : n_(sdag.subgraphs.size()), of_subgraph_(n_), statements_(n_, 0), reads_(n_) {
    std::map<const Buffer*, size_t> param_of;
    for (size_t i = 0; i < prog.params.size(); ++i) param_of[prog.func.params[i].get()] = i;
    auto outermost = [&](size_t i) {
      for (size_t hops = 0; prog.params[i].within && hops <= prog.params.size(); ++hops) {
        auto it = param_of.find(prog.params[i].within.get());
        if (it == param_of.end()) break;
        i = it->second;
      }
      return i;
    };
    // Per outermost buffer and subgraph: the first and last of the subgraph's statements touching it.
    std::map<size_t, std::map<int, std::pair<size_t, size_t>>> touches;
    for (size_t s = 0; s < prog.statement_subgraph.size(); ++s) {
      const int k = prog.statement_subgraph[s];
      if (k < 0) continue;  // the copies into outputs, last in every order
      if (given_.empty() || given_.back() != k) given_.push_back(k);
      const size_t j = statements_[static_cast<size_t>(k)]++;
      for (size_t i : params_touched(prog, s)) {
        if (prog.params[i].kind != ModelParam::Kind::Workspace) continue;
        auto [it, fresh] = touches[outermost(i)].try_emplace(k, j, j);
        it->second.second = j;
      }
    }
    for (const auto& [param, by_subgraph] : touches) {
      const int64_t bytes = std::max<int64_t>(prog.params[param].bytes, 1);
      Live l{(bytes + align - 1) / align * align, {}};
      for (const auto& [k, range] : by_subgraph) {
        of_subgraph_[static_cast<size_t>(k)].push_back({buffers_.size(), range.first, range.second});
        l.touched_by.push_back(k);
      }
      buffers_.push_back(std::move(l));
    }
    for (const SubgraphEdge& e : sdag.edges) reads_[static_cast<size_t>(e.to)].push_back(e.from);
  }

  size_t subgraphs() const { return n_; }
  const std::vector<int>& given() const { return given_; }

  bool ready(const Partial& p, int k) const {
    if (has(p.done, k)) return false;
    for (int from : reads_[static_cast<size_t>(k)])
      if (!has(p.done, from)) return false;
    return true;
  }

  // `p` followed by subgraph k, statement by statement: a buffer comes alive at its first statement
  // when no subgraph run before touched it, and dies after its last when every other subgraph
  // touching it has run.
  Partial then(const Partial& p, int k) const {
    const size_t count = statements_[static_cast<size_t>(k)];
    std::vector<int64_t> born(count, 0), dies(count, 0);
    for (const Touch& t : of_subgraph_[static_cast<size_t>(k)]) {
      const Live& l = buffers_[t.buffer];
      if (std::none_of(l.touched_by.begin(), l.touched_by.end(), [&](int s) { return has(p.done, s); })) born[t.first] += l.bytes;
      if (std::all_of(l.touched_by.begin(), l.touched_by.end(), [&](int s) { return s == k || has(p.done, s); }))
        dies[t.last] += l.bytes;
    }
    Partial next{p.done, p.order, p.peak, p.live};
    for (size_t j = 0; j < count; ++j) {
      next.live += born[j];
      next.peak = std::max(next.peak, next.live);
      next.live -= dies[j];
    }
    next.done[static_cast<size_t>(k) / 64] |= uint64_t{1} << (k % 64);
    next.order.push_back(k);
    return next;
  }

  Partial start() const { return {std::vector<uint64_t>((n_ + 63) / 64, 0), {}, 0, 0}; }

 private:
  size_t n_;
  std::vector<Live> buffers_;
  std::vector<std::vector<Touch>> of_subgraph_;  // per subgraph: the buffers it touches
  std::vector<size_t> statements_;               // per subgraph: its statements
  std::vector<std::vector<int>> reads_;           // per subgraph: the subgraphs it reads
  std::vector<int> given_;                        // the subgraphs with statements, in the program's order
};

}  // namespace

MemoryOrder order_for_memory(const ModelProgram& prog, const SubgraphDAG& sdag, int64_t align, int beam) {
  MemoryOrder result;
  for (const Subgraph& sg : sdag.subgraphs)
    if (!sg.guards.empty()) return result;
  for (int step : prog.statement_step)
    if (step < 0) return result;
  const OrderModel model(prog, sdag, align);
  Partial given = model.start();
  for (int k : model.given()) given = model.then(given, k);
  result.peak_given = given.peak;

  std::vector<Partial> layer{model.start()};
  for (size_t step = 0; step < model.subgraphs(); ++step) {
    std::map<std::vector<uint64_t>, Partial> next;
    for (const Partial& p : layer)
      for (int k = 0; k < static_cast<int>(model.subgraphs()); ++k) {
        if (!model.ready(p, k)) continue;
        Partial q = model.then(p, k);
        auto [it, fresh] = next.try_emplace(q.done, q);
        if (!fresh && std::pair(q.peak, q.live) < std::pair(it->second.peak, it->second.live)) it->second = std::move(q);
      }
    if (next.empty()) return {};  // a cycle: sdag is not a DAG (partition_graph never makes one)
    layer.clear();
    for (auto& [done, p] : next) layer.push_back(std::move(p));
    std::stable_sort(layer.begin(), layer.end(),
                     [](const Partial& a, const Partial& b) { return std::pair(a.peak, a.live) < std::pair(b.peak, b.live); });
    if (layer.size() > static_cast<size_t>(std::max(beam, 1))) layer.resize(static_cast<size_t>(std::max(beam, 1)));
  }
  result.order = layer.front().order;
  result.peak = layer.front().peak;
  return result;
}

}  // namespace kiln::lower
