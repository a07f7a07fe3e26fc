#include "frontend/partition/partition.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "frontend/ir/error.h"

namespace kiln {

bool is_runtime_node(const Graph& g, const Node& n) {
  for (const auto& o : n.outputs)
    if (!o.empty() && !g.value(o).constant) return true;
  return false;
}

std::vector<OpPattern> node_patterns(const Graph& g) {
  std::vector<OpPattern> out;
  for (const Node& n : g.nodes) out.push_back(is_runtime_node(g, n) ? node_op_pattern(n) : OpPattern::Opaque);
  return out;
}

namespace {

// Groups larger than this stop growing (TVM's max_fuse_depth), so one pathological chain cannot
// become a single enormous kernel.
constexpr int kMaxFusedNodes = 256;

// ---- The run-time nodes as a forward graph ------------------------------------------------------------

struct ConsumerEdge {
  int node = 0;  // run-time index of the consumer
  OpPattern pattern = OpPattern::ElemWise;
};

struct ForwardGraph {
  std::vector<int> graph_index;  // run-time index -> index into Graph::nodes
  std::vector<OpPattern> pattern;
  std::vector<std::vector<ConsumerEdge>> consumers;
  std::vector<bool> leaves_graph;  // an output is a graph output, or nothing reads the node
  std::vector<std::vector<Guard>> guards;  // per run-time node: a group holds nodes of one guard only
  /// Its output's elements are wider than its first input's (DequantizeLinear, a Cast to float).
  std::vector<bool> widens;
};

// The edge from a producer to `consumer` through `value`: the consumer's pattern, except that a
// broadcast op reading an input that already has its output shape is elementwise on that input.
OpPattern edge_pattern(const Graph& g, const Node& consumer, OpPattern consumer_pattern, const std::string& value) {
  if (consumer_pattern == OpPattern::Broadcast && g.value(value).shape == g.value(consumer.outputs.at(0)).shape)
    return OpPattern::ElemWise;
  return consumer_pattern;
}

// Producers before consumers, in the order a depth-first walk from the graph outputs finishes nodes
// (operands in argument order, as TVM's post-DFS order over an expression). Unlike the file's node
// order, this depends only on the graph's structure, so the same block fuses the same way wherever
// and in whatever order a model lists its nodes (which of two convolutions feeding an Add absorbs it
// is decided by the Add's operand order). Nodes no output depends on follow in graph order.
std::vector<int> post_dfs_order(const Graph& g, const std::map<std::string, int>& producer) {
  std::vector<int> order;
  std::vector<char> state(g.nodes.size(), 0);  // 0 new, 1 on the stack, 2 done
  auto producer_of = [&](const std::string& v) {
    auto it = producer.find(v);
    return it == producer.end() ? -1 : it->second;
  };
  auto walk = [&](int root) {
    if (root < 0 || state[root]) return;
    std::vector<std::pair<int, size_t>> stack{{root, 0}};  // node, next input to visit
    state[root] = 1;
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      const Node& n = g.nodes[node];
      if (next < n.inputs.size()) {
        int p = producer_of(n.inputs[next++]);
        if (p >= 0 && !state[p]) {
          state[p] = 1;
          stack.push_back({p, 0});
        }
        continue;
      }
      state[node] = 2;
      order.push_back(node);
      stack.pop_back();
    }
  };
  for (const std::string& o : g.outputs) walk(producer_of(o));
  for (size_t gi = 0; gi < g.nodes.size(); ++gi)
    if (is_runtime_node(g, g.nodes[gi])) walk(static_cast<int>(gi));
  return order;
}

ForwardGraph build_forward_graph(const Graph& g) {
  std::map<std::string, int> producer;  // run-time value -> index into Graph::nodes
  for (size_t gi = 0; gi < g.nodes.size(); ++gi)
    for (const auto& o : g.nodes[gi].outputs)
      if (!o.empty() && !g.value(o).constant) producer[o] = static_cast<int>(gi);
  ForwardGraph fg;
  fg.graph_index = post_dfs_order(g, producer);
  const size_t n = fg.graph_index.size();
  std::vector<int> runtime_index(g.nodes.size(), -1);
  for (size_t ri = 0; ri < n; ++ri) {
    runtime_index[fg.graph_index[ri]] = static_cast<int>(ri);
    fg.pattern.push_back(node_op_pattern(g.nodes[fg.graph_index[ri]]));
    const Node& node = g.nodes[fg.graph_index[ri]];
    fg.guards.push_back(node.guards);
    const bool typed = !node.inputs.empty() && !node.inputs[0].empty() && !node.outputs.empty() && !node.outputs[0].empty() &&
                       g.has_value(node.inputs[0]) && g.has_value(node.outputs[0]) && g.value(node.inputs[0]).typed &&
                       g.value(node.outputs[0]).typed;
    fg.widens.push_back(typed && dtype_size(g.value(node.outputs[0]).dtype) > dtype_size(g.value(node.inputs[0]).dtype));
  }
  fg.consumers.resize(n);
  fg.leaves_graph.assign(n, false);
  for (size_t ri = 0; ri < n; ++ri) {
    const Node& node = g.nodes[fg.graph_index[ri]];
    for (const auto& in : node.inputs) {
      auto it = in.empty() ? producer.end() : producer.find(in);
      if (it == producer.end()) continue;  // a graph input or a constant
      fg.consumers[runtime_index[it->second]].push_back({static_cast<int>(ri), edge_pattern(g, node, fg.pattern[ri], in)});
    }
  }
  const std::set<std::string> graph_outputs(g.outputs.begin(), g.outputs.end());
  for (size_t ri = 0; ri < n; ++ri) {
    for (const auto& o : g.nodes[fg.graph_index[ri]].outputs)
      if (graph_outputs.count(o)) fg.leaves_graph[ri] = true;
    if (fg.consumers[ri].empty()) fg.leaves_graph[ri] = true;
  }
  return fg;
}

// ---- Post-dominator tree ---------------------------------------------------------------------------------

// parent: the nearest node on every path from this node to the graph's outputs (-1: none, because an
// output leaves the graph or the paths only meet outside it). pattern: the largest edge pattern on
// those paths up to the parent.
struct PostDom {
  int parent = -1;
  int depth = 1;
  OpPattern pattern = OpPattern::ElemWise;
};

int common_post_dominator(const std::vector<PostDom>& dom, int a, int b, OpPattern& pattern) {
  while (a != b) {
    if (a < 0 || b < 0) return -1;
    if (dom[a].depth < dom[b].depth) {
      pattern = combine_patterns(pattern, dom[b].pattern);
      b = dom[b].parent;
    } else if (dom[b].depth < dom[a].depth) {
      pattern = combine_patterns(pattern, dom[a].pattern);
      a = dom[a].parent;
    } else {
      pattern = combine_patterns(pattern, combine_patterns(dom[a].pattern, dom[b].pattern));
      a = dom[a].parent;
      b = dom[b].parent;
    }
  }
  return a;
}

std::vector<PostDom> post_dominators(const ForwardGraph& fg) {
  const int n = static_cast<int>(fg.pattern.size());
  std::vector<PostDom> dom(n);
  for (int i = n - 1; i >= 0; --i) {
    if (fg.leaves_graph[i]) {
      dom[i] = {-1, 1, OpPattern::Opaque};
      continue;
    }
    const auto& edges = fg.consumers[i];
    OpPattern pattern = combine_patterns(OpPattern::ElemWise, edges[0].pattern);
    int parent = edges[0].node;
    for (size_t e = 1; e < edges.size(); ++e) {
      parent = common_post_dominator(dom, parent, edges[e].node, pattern);
      pattern = combine_patterns(pattern, edges[e].pattern);
    }
    dom[i] = {parent, parent >= 0 ? dom[parent].depth + 1 : 1, pattern};
  }
  return dom;
}

// ---- Groups (union-find) ---------------------------------------------------------------------------------

class Groups {
 public:
  explicit Groups(const std::vector<OpPattern>& patterns) : parent_(patterns.size()), pattern_(patterns) {
    for (size_t i = 0; i < patterns.size(); ++i) {
      parent_[i] = static_cast<int>(i);
      size_.push_back(1);
      anchors_.push_back(is_anchor_pattern(patterns[i]) ? 1 : 0);
      has_fusable_anchor_.push_back(patterns[i] == OpPattern::OutEWiseFusable);
    }
  }
  int root(int i) {
    while (parent_[i] != i) i = parent_[i] = parent_[parent_[i]];
    return i;
  }
  /// The pattern kept on group object i: its own node's, raised when an OutEWiseFusable anchor
  /// merged into it (TVM's rule: elementwise members do not change what a group may still absorb).
  OpPattern own_pattern(int i) const { return pattern_[i]; }
  OpPattern root_pattern(int i) { return pattern_[root(i)]; }
  int size(int i) { return size_[root(i)]; }
  int anchors(int i) { return anchors_[root(i)]; }
  void merge_into(int child, int target) {
    child = root(child);
    target = root(target);
    if (child == target) return;
    parent_[child] = target;
    size_[target] += size_[child];
    anchors_[target] += anchors_[child];
    if (has_fusable_anchor_[child]) {
      has_fusable_anchor_[target] = true;
      pattern_[target] = combine_patterns(pattern_[target], pattern_[child]);
    }
  }

 private:
  std::vector<int> parent_;
  std::vector<OpPattern> pattern_;
  std::vector<int> size_, anchors_;
  std::vector<bool> has_fusable_anchor_;
};

// fcond(kind of the group a path node is in, whether it is the sink).
using PathCondition = bool (*)(OpPattern, bool);

class Fuser {
 public:
  Fuser(const ForwardGraph& fg, const std::vector<PostDom>& dom) : fg_(fg), dom_(dom), groups_(fg.pattern) {}

  Groups run() {
    for (int phase = 0; phase < 2; ++phase)
      for (int i = 0; i < static_cast<int>(fg_.pattern.size()); ++i) visit(i, phase);
    return groups_;
  }

 private:
  void visit(int i, int phase) {
    const OpPattern own = groups_.own_pattern(i);
    const int sink = dom_[i].parent;
    if (own == OpPattern::Opaque || sink < 0) return;
    if (groups_.root(i) == groups_.root(sink)) return;
    if (groups_.size(i) + groups_.size(sink) > kMaxFusedNodes) return;
    const OpPattern edge = dom_[i].pattern;
    if (own == OpPattern::OutEWiseFusable) {
      // Anchor: absorb a post-dominating elementwise chain, all of whose nodes are at most broadcast;
      // but not a widening op (a DequantizeLinear) that a reduction reads next: it goes into that
      // reduction instead, so the narrow value crosses between the subgraphs rather than the wide
      // one (DS-CNN's int8 features before its average pool, a quarter of the float32 bytes).
      if (phase == 0 && edge == OpPattern::ElemWise && !widens_into_reduction(sink))
        try_fuse(i, sink, [](OpPattern k, bool) { return k <= OpPattern::Broadcast; });
    } else if (own <= OpPattern::Broadcast) {
      // Elementwise: flow into the consumer group, which may be a reduction or an anchored group.
      if (edge <= OpPattern::Injective || edge == OpPattern::CommReduce)
        try_fuse(i, sink, [](OpPattern k, bool is_sink) {
          return is_sink ? k != OpPattern::Opaque : k <= OpPattern::Injective;
        });
    } else if (own == OpPattern::Injective) {
      // Deferred to phase 1 so anchors finish absorbing their elementwise consumers first.
      if (phase == 1)
        try_fuse(i, sink, [](OpPattern k, bool is_sink) {
          return k <= OpPattern::Injective || (is_sink && k == OpPattern::CommReduce);
        });
    }
    // CommReduce: a reduction never fuses into what follows it.
  }

  // Node n widens its input, and reductions are all that read it.
  bool widens_into_reduction(int n) const {
    if (!fg_.widens[n] || fg_.leaves_graph[n] || fg_.consumers[n].empty()) return false;
    for (const ConsumerEdge& e : fg_.consumers[n])
      if (e.pattern != OpPattern::CommReduce) return false;
    return true;
  }

  bool path_allows(int node, int sink, PathCondition cond, std::set<int>& visited) {
    if (!visited.insert(node).second) return true;
    if (!cond(groups_.root_pattern(node), node == sink)) return false;
    if (node == sink) return true;
    for (const ConsumerEdge& e : fg_.consumers[node])
      if (!path_allows(e.node, sink, cond, visited)) return false;
    return true;
  }

  // Fuses src and every node on its paths to sink into sink's group, when every node on the way
  // satisfies `cond` and the result still has at most one anchor.
  void try_fuse(int src, int sink, PathCondition cond) {
    std::set<int> path;
    for (const ConsumerEdge& e : fg_.consumers[src])
      if (!path_allows(e.node, sink, cond, path)) return;
    // A run-time If's branches run under their guard: a group runs whole or not at all.
    for (int n : path)
      if (fg_.guards[n] != fg_.guards[src]) return;
    std::set<int> roots{groups_.root(src)};
    for (int n : path) roots.insert(groups_.root(n));
    int anchors = 0;
    for (int r : roots) anchors += groups_.anchors(r);
    if (anchors > 1) return;
    const int target = groups_.root(sink);
    for (int r : roots) groups_.merge_into(r, target);
  }

  const ForwardGraph& fg_;
  const std::vector<PostDom>& dom_;
  Groups groups_;
};

// ---- Groups -> SubgraphDAG ---------------------------------------------------------------------------------

// Orders groups so producers come first; ties go to the group whose first node is earliest, which
// keeps the order stable and close to the graph's.
std::vector<int> topological_group_order(const std::vector<std::vector<int>>& members,
                                         const std::vector<std::set<int>>& succ) {
  const size_t n = members.size();
  std::vector<int> indegree(n, 0);
  for (const auto& s : succ)
    for (int t : s) ++indegree[t];
  std::set<std::pair<int, int>> ready;  // (first member, group)
  for (size_t gi = 0; gi < n; ++gi)
    if (indegree[gi] == 0) ready.insert({members[gi].front(), static_cast<int>(gi)});
  std::vector<int> order;
  while (!ready.empty()) {
    int gi = ready.begin()->second;
    ready.erase(ready.begin());
    order.push_back(gi);
    for (int t : succ[gi])
      if (--indegree[t] == 0) ready.insert({members[t].front(), t});
  }
  if (order.size() != n) throw InternalError("partition: fused groups form a cycle");
  return order;
}

SubgraphDAG make_subgraph_dag(const Graph& g, const ForwardGraph& fg, Groups& groups) {
  const int n = static_cast<int>(fg.pattern.size());
  // Group members per root, as indices into Graph::nodes in ascending (topological) order.
  std::map<int, int> group_of_root;
  std::vector<std::vector<int>> members;
  std::vector<int> group_of(n);
  for (int i = 0; i < n; ++i) {
    auto [it, added] = group_of_root.emplace(groups.root(i), static_cast<int>(members.size()));
    if (added) members.emplace_back();
    members[it->second].push_back(fg.graph_index[i]);
    group_of[i] = it->second;
  }
  for (auto& m : members) std::sort(m.begin(), m.end());
  std::vector<std::set<int>> succ(members.size());
  for (int i = 0; i < n; ++i)
    for (const ConsumerEdge& e : fg.consumers[i])
      if (group_of[e.node] != group_of[i]) succ[group_of[i]].insert(group_of[e.node]);
  // A guarded group runs after the group that computes its condition, though it reads no data of it.
  std::map<std::string, int> group_of_value;
  for (int i = 0; i < n; ++i)
    for (const std::string& o : g.nodes[fg.graph_index[i]].outputs)
      if (!o.empty()) group_of_value[o] = group_of[i];
  for (int i = 0; i < n; ++i)
    for (const Guard& guard : fg.guards[i]) {
      auto it = group_of_value.find(guard.cond);
      if (it != group_of_value.end() && it->second != group_of[i]) succ[it->second].insert(group_of[i]);
    }
  std::vector<int> order = topological_group_order(members, succ);

  SubgraphDAG dag;
  std::map<std::string, int> producer_subgraph;
  for (size_t k = 0; k < order.size(); ++k) {
    Subgraph sg;
    sg.id = static_cast<int>(k);
    sg.nodes = members[order[k]];
    OpPattern best = OpPattern::ElemWise;
    for (int gi : sg.nodes) {
      OpPattern p = node_op_pattern(g.nodes[gi]);
      if (sg.anchor < 0 || static_cast<int>(p) > static_cast<int>(best)) {
        best = p;
        sg.anchor = gi;
      }
    }
    sg.pattern = best;
    sg.guards = g.nodes[sg.nodes.front()].guards;
    std::set<std::string> produced, seen_inputs;
    for (int gi : sg.nodes) {
      const Node& node = g.nodes[gi];
      for (const auto& in : node.inputs)
        if (!in.empty() && !produced.count(in) && seen_inputs.insert(in).second) sg.inputs.push_back(in);
      for (const auto& o : node.outputs)
        if (!o.empty()) {
          produced.insert(o);
          producer_subgraph[o] = sg.id;
        }
    }
    dag.subgraphs.push_back(std::move(sg));
  }
  // Outputs: values another subgraph reads, or graph outputs; edges in consumer order.
  std::vector<std::set<std::string>> exported(dag.subgraphs.size());
  for (Subgraph& sg : dag.subgraphs)
    for (const std::string& in : sg.inputs) {
      auto it = producer_subgraph.find(in);
      if (it == producer_subgraph.end() || g.value(in).constant) continue;
      exported[it->second].insert(in);
      dag.edges.push_back({it->second, sg.id, in});
    }
  for (const std::string& o : g.outputs) {
    auto it = producer_subgraph.find(o);
    if (it != producer_subgraph.end() && !g.value(o).constant) exported[it->second].insert(o);
  }
  for (const Subgraph& sg : dag.subgraphs)
    for (const Guard& guard : sg.guards) {
      auto it = producer_subgraph.find(guard.cond);
      if (it != producer_subgraph.end() && it->second != sg.id) exported[it->second].insert(guard.cond);
    }
  for (Subgraph& sg : dag.subgraphs)
    for (int gi : sg.nodes)
      for (const auto& o : g.nodes[gi].outputs)
        if (!o.empty() && exported[sg.id].count(o)) sg.outputs.push_back(o);
  return dag;
}

}  // namespace

SubgraphDAG partition_graph(const Graph& g) {
  ForwardGraph fg = build_forward_graph(g);
  std::vector<PostDom> dom = post_dominators(fg);
  Groups groups = Fuser(fg, dom).run();
  return make_subgraph_dag(g, fg, groups);
}

std::string print_subgraph_dag(const Graph& g, const SubgraphDAG& dag) {
  auto type_of = [&](const std::string& name) {
    const Value& v = g.value(name);
    return dtype_name(v.dtype) + "[" + shape_str(v.shape) + "]" + (v.constant ? " const" : "");
  };
  std::ostringstream os;
  os << "subgraphs " << dag.subgraphs.size() << " (from " << g.nodes.size() << " nodes)\n";
  for (const Subgraph& sg : dag.subgraphs) {
    const Node& anchor = g.nodes[sg.anchor];
    os << "subgraph " << sg.id << " " << op_pattern_name(sg.pattern) << ", anchor " << anchor.name << " ("
       << anchor.op_type << ")\n  nodes  ";
    for (int gi : sg.nodes) os << " " << g.nodes[gi].name << ":" << g.nodes[gi].op_type;
    os << "\n";
    if (!sg.guards.empty()) os << "  runs    " << guards_str(sg.guards) << "\n";
    for (const auto& in : sg.inputs) os << "  input   " << in << ": " << type_of(in) << "\n";
    for (const auto& o : sg.outputs) os << "  output  " << o << ": " << type_of(o) << "\n";
  }
  os << "edges\n";
  for (const SubgraphEdge& e : dag.edges) os << "  " << e.from << " -> " << e.to << "  " << e.value << "\n";
  return os.str();
}

}  // namespace kiln
