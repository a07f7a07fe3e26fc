#include "frontend/subst/graph_match.h"

#include <algorithm>
#include <functional>
#include <set>
#include <unordered_map>

#include "frontend/ir/error.h"
#include "frontend/ops/shape_attributes.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/passes/remove_dead_nodes.h"

namespace kiln::subst {
namespace {

bool uses_op(const TermRef& t, const std::set<std::string>& ops) {
  if (ops.count(t->op)) return true;
  return std::any_of(t->args.begin(), t->args.end(), [&](const TermRef& a) { return uses_op(a, ops); });
}

// Rules without conv, enlarge or pooling are about matrices: their axes count from the last one.
bool matrix_world(const Rule& r) {
  static const std::set<std::string> fmap_ops = {"conv", "enlarge", "pool_avg", "pool_max"};
  for (const auto* side : {&r.lhs, &r.rhs})
    for (const TermRef& t : *side)
      if (uses_op(t, fmap_ops)) return false;
  return true;
}

int64_t normalized_axis(int64_t axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; }

// The identity permutation with the last two axes swapped: transpose's.
std::vector<int64_t> last_two_swapped(size_t rank) {
  std::vector<int64_t> perm(rank);
  for (size_t a = 0; a < rank; ++a) perm[a] = static_cast<int64_t>(a);
  std::swap(perm[rank - 1], perm[rank - 2]);
  return perm;
}

// The graph axis a term's axis names on a value of rank `rank`: the matrix world counts from the
// last two axes (a vector has one), the feature-map world's are NCHW's.
int64_t world_axis(bool matrix, int64_t term_axis, size_t rank) {
  return matrix && rank >= 2 ? term_axis + static_cast<int64_t>(rank) - 2 : term_axis;
}

// The op type of the node that makes a term's root value.
std::string root_op_type(const Term& t) {
  static const std::map<std::string, std::string> types = {
      {"ewadd", "Add"},     {"biasadd", "Add"},       {"ewmul", "Mul"},         {"smul", "Mul"},         {"transpose", "Transpose"}, {"matmul", "MatMul"},
      {"enlarge", "Pad"},   {"relu", "Relu"},         {"pool_avg", "AveragePool"}, {"pool_max", "MaxPool"}, {"concat", "Concat"},
      {"split0", "Slice"}, {"split1", "Slice"}};
  if (t.op == "conv") return t.relu ? "Relu" : "Conv";
  auto it = types.find(t.op);
  return it == types.end() ? "" : it->second;
}

// Reads a graph against terms: which node makes each value (and, from `readers`, who reads it).
class Matcher {
 public:
  Matcher(const Graph& g, const GraphReaders& readers) : g_(g), readers_(readers) {
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (const std::string& o : g.nodes[i].outputs) producer_[o] = i;
    for (const auto& [name, value] : g.values) values_[name] = &value;
  }

  // Matches `t` at value `v`, extending `m`; `nodes` collects the matched nodes.
  bool match(const TermRef& t, const std::string& v, Match& m, std::set<size_t>& nodes) const {
    if (t->op == "leaf") {
      auto [it, added] = m.leaves.emplace(t->name, v);
      return added || it->second == v;
    }
    const Node* n = node_of(v);
    if (!n || !may_match(*t, *n) || !n->guards.empty() || !n->domain.empty()) return false;
    const size_t index = producer_.at(v);
    const Shape& out = shape(v);
    const std::string& op = t->op;
    // may_match has checked n's op type against the term's.
    if (op == "relu") return take(index, nodes) && match(t->args[0], n->inputs[0], m, nodes);
    if (op == "ewadd" || op == "ewmul") {
      if (n->inputs.size() != 2) return false;
      if (shape(n->inputs[0]) != out || shape(n->inputs[1]) != out) return false;
      return take(index, nodes) && either_order(t, n->inputs[0], n->inputs[1], m, nodes);
    }
    if (op == "biasadd" || op == "smul") {  // x + b (b one value per column) or x * s (s one value), in either order
      if (n->inputs.size() != 2 || !take(index, nodes)) return false;
      for (int k = 0; k < 2; ++k) {
        const std::string& x = n->inputs[static_cast<size_t>(k)];
        const std::string& other = n->inputs[static_cast<size_t>(1 - k)];
        if (shape(x) != out) continue;
        if (op == "biasadd" ? out.empty() || shape(other) != Shape{out.back()}
                            : num_elements(shape(other)) != 1 || shape(other).size() > out.size())
          continue;
        if (bind_operands(t, x, other, m, nodes)) return true;
      }
      return false;
    }
    if (op == "transpose") {
      if (out.size() < 2) return false;
      return transpose_perm(*n, static_cast<int64_t>(out.size())) == last_two_swapped(out.size()) && take(index, nodes) &&
             match(t->args[0], n->inputs[0], m, nodes);
    }
    if (op == "matmul") {
      if (shape(n->inputs[1]).size() != 2 || shape(n->inputs[0]).size() < 2) return false;
      return take(index, nodes) && match(t->args[0], n->inputs[0], m, nodes) && match(t->args[1], n->inputs[1], m, nodes);
    }
    if (op == "conv") return match_conv(t, index, m, nodes);
    if (op == "enlarge") {
      if (n->inputs.size() < 2 || n->attr_string("mode", "constant") != "constant") return false;
      if (n->inputs.size() > 2 && !n->inputs[2].empty()) return false;  // a pad value
      const Tensor* pads = g_.constant_input(*n, 1);
      const int64_t p = (3 - t->from) / 2;
      if (!pads || pads->to_ints() != std::vector<int64_t>{0, 0, p, p, 0, 0, p, p}) return false;
      if (shape(n->inputs[0]).size() != 4 || shape(n->inputs[0])[2] != t->from || shape(n->inputs[0])[3] != t->from) return false;
      return take(index, nodes) && match(t->args[0], n->inputs[0], m, nodes);
    }
    if (op == "pool_avg" || op == "pool_max") {
      if (n->outputs.size() != 1 || !is_3x3_same_pool(*n)) return false;
      if (op == "pool_avg" && n->attr_int("count_include_pad", 0) != 1) return false;
      return take(index, nodes) && match(t->args[0], n->inputs[0], m, nodes);
    }
    if (op == "concat") {
      if (n->inputs.size() != 2) return false;
      if (normalized_axis(n->attr_int("axis", 0), out.size()) != axis_of(t->axis, out.size())) return false;
      return take(index, nodes) && match(t->args[0], n->inputs[0], m, nodes) && match(t->args[1], n->inputs[1], m, nodes);
    }
    if (op == "split0" || op == "split1") return match_split(t, index, m, nodes);
    return false;
  }

  // The graph axis of a term's axis on a value of rank `rank`.
  int64_t axis_of(int64_t term_axis, size_t rank) const { return world_axis(matrix_, term_axis, rank); }

  const Shape& shape(const std::string& v) const { return values_.at(v)->shape; }

  // Where a split of `t` falls, given its leaves' bindings; -1 when not known.
  int64_t split_point(const Term& t, const Match& m) const {
    if (t.split_at >= 0) return t.split_at;
    auto leaf = m.leaves.find(t.split_leaf);
    if (leaf == m.leaves.end()) return -1;
    const Shape& s = shape(leaf->second);
    const int64_t a = axis_of(t.split_leaf_axis < 0 ? t.axis : t.split_leaf_axis, s.size());
    return a >= 0 && a < static_cast<int64_t>(s.size()) ? s[static_cast<size_t>(a)] : -1;
  }

  const std::vector<size_t>& nodes_of_op(const std::string& op_type) const {
    static const std::vector<size_t> none;
    if (by_op_.empty())
      for (size_t i = 0; i < g_.nodes.size(); ++i) by_op_[g_.nodes[i].op_type].push_back(i);
    auto it = by_op_.find(op_type);
    return it == by_op_.end() ? none : it->second;
  }

  const Graph& graph() const { return g_; }

  size_t producer_of(const std::string& v) const { return producer_.at(v); }

  // A quick test that `n` may make `t`'s value, before any binding is tried: its op type, and for
  // each operator argument of `t`, some input of `n` (of the conv under a fused relu) made by a node
  // of that argument's op type.
  bool may_match(const Term& t, const Node& n) const {
    if (n.op_type != root_op_type(t)) return false;
    const Node* under = &n;
    if (t.op == "conv" && t.relu) {
      under = node_of(n.inputs.empty() ? std::string() : n.inputs[0]);
      if (!under || under->op_type != "Conv") return false;
    }
    for (const TermRef& a : t.args) {
      if (a->op == "leaf") continue;
      const std::string type = root_op_type(*a);
      const bool found = std::any_of(under->inputs.begin(), under->inputs.end(), [&](const std::string& in) {
        const Node* p = in.empty() ? nullptr : node_of(in);
        return p && p->op_type == type;
      });
      if (!found) return false;
    }
    return true;
  }

  // Terms are read in `r`'s world from here on.
  void read_as(const Rule& r) { matrix_ = matrix_world(r); }

 private:
  const Node* node_of(const std::string& v) const {
    auto it = producer_.find(v);
    return it == producer_.end() ? nullptr : &g_.nodes[it->second];
  }

  // A node belongs to one matched operator only.
  static bool take(size_t index, std::set<size_t>& nodes) { return nodes.insert(index).second; }

  // `t`'s two operands matched at `first` and `second`; `m` and `nodes` change only when they match.
  bool bind_operands(const TermRef& t, const std::string& first, const std::string& second, Match& m,
                     std::set<size_t>& nodes) const {
    Match trial = m;
    std::set<size_t> trial_nodes = nodes;
    if (!match(t->args[0], first, trial, trial_nodes) || !match(t->args[1], second, trial, trial_nodes)) return false;
    m = std::move(trial);
    nodes = std::move(trial_nodes);
    return true;
  }

  bool either_order(const TermRef& t, const std::string& a, const std::string& b, Match& m, std::set<size_t>& nodes) const {
    return bind_operands(t, a, b, m, nodes) || bind_operands(t, b, a, m, nodes);
  }

  static bool all_equal(const std::vector<int64_t>& v, int64_t x) {
    return std::all_of(v.begin(), v.end(), [&](int64_t e) { return e == x; });
  }

  bool is_3x3_same_pool(const Node& n) const {
    return n.attr_ints("kernel_shape") == std::vector<int64_t>{3, 3} && all_equal(n.attr_ints("strides", {1, 1}), 1) &&
           all_equal(n.attr_ints("dilations", {1, 1}), 1) && n.attr_ints("pads") == std::vector<int64_t>{1, 1, 1, 1} &&
           n.attr_string("auto_pad", "NOTSET") == "NOTSET" && n.attr_int("ceil_mode", 0) == 0;
  }

  bool match_conv(const TermRef& t, size_t index, Match& m, std::set<size_t>& nodes) const {
    size_t conv_index = index;
    if (t->relu) {  // the Relu, then the Conv it alone reads
      const Node& r = g_.nodes[index];
      if (!take(index, nodes)) return false;
      const Node* c = node_of(r.inputs[0]);
      if (!c || readers_.count(r.inputs[0]) != 1 || !c->guards.empty()) return false;
      conv_index = producer_.at(r.inputs[0]);
    }
    const Node& n = g_.nodes[conv_index];
    if (!n.domain.empty()) return false;  // may_match saw a Conv
    const bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
    if (has_bias != (t->args.size() == 3)) return false;
    const Shape& w = shape(n.inputs[1]);
    if (w.size() != 4 || shape(n.inputs[0]).size() != 4) return false;
    if (!all_equal(n.attr_ints("strides", {1, 1}), t->stride) || !all_equal(n.attr_ints("dilations", {1, 1}), 1)) return false;
    if (w[2] % 2 == 0 || w[3] % 2 == 0) return false;
    const std::string auto_pad = n.attr_string("auto_pad", "NOTSET");
    const std::vector<int64_t> pads = n.attr_ints("pads", {0, 0, 0, 0});
    const bool valid = (auto_pad == "NOTSET" || auto_pad == "VALID") && all_equal(pads, 0);
    // ONNX's SAME_* pads by the output size, which at stride 2 may be one-sided: only explicit
    // symmetric pads are the term's "same" there.
    const bool same = (t->stride == 1 && (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")) ||
                      (auto_pad == "NOTSET" && pads == std::vector<int64_t>{(w[2] - 1) / 2, (w[3] - 1) / 2, (w[2] - 1) / 2, (w[3] - 1) / 2});
    if (!(t->same ? same : valid)) return false;
    const int64_t group = n.attr_int("group", 1);
    if (t->group == 0 ? (group != w[0] || w[1] != 1) : group != t->group) return false;
    if (!take(conv_index, nodes)) return false;
    for (size_t a = 0; a < t->args.size(); ++a)
      if (!match(t->args[a], n.inputs[a], m, nodes)) return false;
    return true;
  }

  bool match_split(const TermRef& t, size_t index, Match& m, std::set<size_t>& nodes) const {
    const Node& n = g_.nodes[index];
    const Shape& in = shape(n.inputs[0]);
    const int64_t axis = axis_of(t->axis, in.size());
    const std::optional<std::pair<int64_t, int64_t>> run = slice_run_along(g_, n, axis);
    if (!run || !take(index, nodes) || !match(t->args[0], n.inputs[0], m, nodes)) return false;
    const int64_t at = split_point(*t, m);
    if (at < 0) return true;  // its leaf is bound later: find_matches checks again
    const int64_t extent = in[static_cast<size_t>(axis)];
    if (at == 0 || at >= extent) return false;
    return t->op == "split0" ? *run == std::pair<int64_t, int64_t>{0, at} : *run == std::pair<int64_t, int64_t>{at, extent};
  }

  const Graph& g_;
  bool matrix_ = false;
  const GraphReaders& readers_;
  std::unordered_map<std::string, size_t> producer_;
  std::unordered_map<std::string, const Value*> values_;
  mutable std::unordered_map<std::string, std::vector<size_t>> by_op_;
};

void match_roots(const Matcher& mm, const Rule& r, size_t k, Match& m, std::set<size_t>& nodes, std::vector<Match>& out) {
  if (k == r.lhs.size()) {
    out.push_back(m);
    out.back().nodes.assign(nodes.begin(), nodes.end());
    return;
  }
  const std::string type = root_op_type(*r.lhs[k]);
  for (size_t i : mm.nodes_of_op(type)) {
    if (r.symmetric && k > 0 && i <= mm.producer_of(m.roots.back())) continue;
    const Node& n = mm.graph().nodes[i];
    if (!mm.may_match(*r.lhs[k], n)) continue;
    if (n.outputs.empty() || n.outputs[0].empty()) continue;
    const std::string& v = n.outputs[0];
    if (std::find(m.roots.begin(), m.roots.end(), v) != m.roots.end()) continue;
    Match trial = m;
    std::set<size_t> trial_nodes = nodes;
    if (!mm.match(r.lhs[k], v, trial, trial_nodes)) continue;
    trial.roots.push_back(v);
    match_roots(mm, r, k + 1, trial, trial_nodes, out);
  }
}

// Writes a rule's right-hand side as nodes of `g`.
class RhsWriter {
 public:
  RhsWriter(Graph& g, const Rule& r, const Match& m) : g_(g), m_(m), matrix_(matrix_world(r)) {}

  // The value computing `t`; `into` names the value when `t` is a root (its old name).
  std::string write(const TermRef& t, const std::string& into = "") {
    if (auto it = written_.find(t.get()); it != written_.end()) {
      if (into.empty()) return it->second;
      return emit("Identity", {it->second}, {}, into);
    }
    std::string v;
    if (t->op == "leaf") {
      v = m_.leaves.at(t->name);
      if (!into.empty()) v = emit("Identity", {v}, {}, into);
    } else {
      v = node(*t, into);
    }
    written_[t.get()] = v;
    return v;
  }

  std::vector<Node>& nodes() { return nodes_; }

  /// Whether every element-wise operator written reads two operands of one shape, as the term
  /// means: an ONNX Add or Mul would broadcast a [k, c, 1, 1] kernel over a [k, c, 3, 3] one, which
  /// shape inference accepts and no axiom covers. Call after the new values' shapes are inferred.
  bool elementwise_operands_match() const {
    return std::all_of(elementwise_.begin(), elementwise_.end(), [&](const std::pair<std::string, std::string>& ab) {
      return g_.value(ab.first).shape == g_.value(ab.second).shape;
    });
  }

 private:
  std::string emit(const std::string& op, std::vector<std::string> ins, Attributes attrs, const std::string& into = "") {
    Node n;
    n.op_type = op;
    n.opset = 13;
    n.inputs = std::move(ins);
    n.attrs = std::move(attrs);
    // New values are named after the first output the rule replaces: "layer1.0.bn1.subst.Conv".
    n.outputs = {into.empty() ? g_.add_value(m_.roots[0] + ".subst." + op, DType::Undefined, {}) : into};
    g_.value(n.outputs[0]).typed = false;
    n.name = n.outputs[0];
    nodes_.push_back(std::move(n));
    return nodes_.back().outputs[0];
  }

  std::string ints(const std::vector<int64_t>& v) {
    return g_.add_constant(m_.roots[0] + ".subst.ints", Tensor::from_ints(DType::Int64, {static_cast<int64_t>(v.size())}, v));
  }

  // Ranks and kernel extents follow from the leaves: the ops of the term language keep rank, a
  // matmul has its left operand's, a conv has 4.
  size_t rank(const Term& t) const {
    if (t.op == "leaf") return g_.value(m_.leaves.at(t.name)).shape.size();
    if (t.op == "conv" || t.op == "enlarge") return 4;
    return rank(*t.args[0]);
  }
  KernelShape kernel(const Term& t) const {
    return kernel_shape(t, [&](const std::string& leaf) { return g_.value(m_.leaves.at(leaf)).shape; });
  }
  int64_t axis_of(int64_t term_axis, size_t r) const { return world_axis(matrix_, term_axis, r); }

  std::string node(const Term& t, const std::string& into) {
    std::vector<std::string> a;
    for (const TermRef& arg : t.args) a.push_back(write(arg));
    const std::string& op = t.op;
    if (op == "ewadd" || op == "ewmul") elementwise_.emplace_back(a[0], a[1]);
    if (op == "ewadd" || op == "biasadd") return emit("Add", a, {}, into);
    if (op == "ewmul" || op == "smul") return emit("Mul", a, {}, into);
    if (op == "relu") return emit("Relu", a, {}, into);
    if (op == "matmul") return emit("MatMul", a, {}, into);
    if (op == "transpose") return emit("Transpose", a, {{"perm", AttrValue(last_two_swapped(rank(t)))}}, into);
    if (op == "concat") return emit("Concat", a, {{"axis", AttrValue(axis_of(t.axis, rank(t)))}}, into);
    if (op == "split0" || op == "split1") {
      const int64_t axis = axis_of(t.axis, rank(t));
      int64_t at = t.split_at;
      if (at < 0) {
        const Shape& s = g_.value(m_.leaves.at(t.split_leaf)).shape;
        at = s.at(static_cast<size_t>(axis_of(t.split_leaf_axis < 0 ? t.axis : t.split_leaf_axis, s.size())));
      }
      const bool first = op == "split0";
      return emit("Slice", {a[0], ints({first ? 0 : at}), ints({first ? at : INT64_MAX}), ints({axis})}, {}, into);
    }
    if (op == "enlarge") {
      const int64_t p = (3 - t.from) / 2;
      return emit("Pad", {a[0], ints({0, 0, p, p, 0, 0, p, p})}, {}, into);
    }
    if (op == "pool_avg" || op == "pool_max") {
      Attributes at = {{"kernel_shape", AttrValue(std::vector<int64_t>{3, 3})}, {"pads", AttrValue(std::vector<int64_t>{1, 1, 1, 1})}};
      if (op == "pool_avg") at["count_include_pad"] = AttrValue(int64_t{1});
      return emit(op == "pool_avg" ? "AveragePool" : "MaxPool", a, at, into);
    }
    if (op == "conv") {
      const KernelShape k = kernel(*t.args[1]);
      const int64_t group = t.group == 0 ? k.filters : t.group;  // depthwise: one group per filter
      Attributes at = {{"group", AttrValue(group)}, {"strides", AttrValue(std::vector<int64_t>{t.stride, t.stride})}};
      at["pads"] = AttrValue(t.same ? std::vector<int64_t>{(k.height - 1) / 2, (k.width - 1) / 2, (k.height - 1) / 2, (k.width - 1) / 2}
                                    : std::vector<int64_t>{0, 0, 0, 0});
      if (!t.relu) return emit("Conv", a, at, into);
      return emit("Relu", {emit("Conv", a, at)}, {}, into);
    }
    throw Error("subst: operator '" + op + "' has no graph form");
  }

  Graph& g_;
  const Match& m_;
  const bool matrix_;
  std::map<const Term*, std::string> written_;
  std::vector<Node> nodes_;
  std::vector<std::pair<std::string, std::string>> elementwise_;  // the operands of each ewadd / ewmul
};

// Kahn's order, stable in the nodes' positions; false on a cycle.
bool sort_topologically(Graph& g) {
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& o : g.nodes[i].outputs) producer[o] = i;
  std::vector<std::vector<size_t>> readers(g.nodes.size());
  std::vector<int> waiting(g.nodes.size(), 0);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& in : g.nodes[i].inputs)
      if (auto p = producer.find(in); p != producer.end()) {
        readers[p->second].push_back(i);
        ++waiting[i];
      }
  std::set<size_t> ready;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!waiting[i]) ready.insert(i);
  std::vector<Node> order;
  while (!ready.empty()) {
    const size_t i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(g.nodes[i]);
    for (size_t r : readers[i])
      if (--waiting[r] == 0) ready.insert(r);
  }
  if (order.size() != g.nodes.size()) return false;
  g.nodes = std::move(order);
  return true;
}

}  // namespace

std::vector<std::pair<size_t, Match>> find_all_matches(const Graph& g, const GraphReaders& readers,
                                                       const std::vector<Rule>& rules) {
  Matcher mm(g, readers);
  std::vector<std::pair<size_t, Match>> out;
  for (size_t i = 0; i < rules.size(); ++i) {
    const Rule& rule = rules[i];
    if (mm.nodes_of_op(root_op_type(*rule.lhs[0])).empty()) continue;
    mm.read_as(rule);
    std::vector<Match> found;
    Match m;
    std::set<size_t> nodes;
    match_roots(mm, rule, 0, m, nodes, found);
    // A split point whose leaf was bound after the split was read: every split checked again.
    for (Match& c : found) {
      std::set<size_t> again;
      Match replay{c.leaves, {}, {}};
      bool ok = true;
      for (size_t k = 0; k < rule.lhs.size() && ok; ++k) ok = mm.match(rule.lhs[k], c.roots[k], replay, again);
      // Rewriting what folds before run time (a kernel sum the search left unfolded) changes nothing
      // that runs: not a match.
      const bool folds = std::all_of(c.roots.begin(), c.roots.end(), [&](const std::string& v) { return readers.constant_values().count(v) != 0; });
      if (ok && !folds) out.emplace_back(i, std::move(c));
    }
  }
  return out;
}

std::vector<Match> find_matches(const Graph& g, const Rule& rule) {
  std::vector<Match> out;
  for (auto& [i, m] : find_all_matches(g, GraphReaders(g), {rule})) out.push_back(std::move(m));
  return out;
}

GraphReaders::GraphReaders(const Graph& g)
    : outputs_(g.outputs), epilogue_values_(subst::epilogue_values(g)), constant_values_(values_of_constants(g)) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const std::string& in : g.nodes[i].inputs) nodes_[in].push_back(i);
    if (g.nodes[i].op_type == "Slice" && !g.nodes[i].outputs.empty()) slice_outputs_.insert(g.nodes[i].outputs[0]);
  }
}

const std::vector<size_t>& GraphReaders::nodes(const std::string& v) const {
  static const std::vector<size_t> none;
  auto it = nodes_.find(v);
  return it == nodes_.end() ? none : it->second;
}

std::optional<double> cost_change(const Graph& g, const GraphReaders& readers, const Rule& rule, const Match& m,
                                  const Roofline& r) {
  // The right-hand side on its own: a graph of the leaves' values (types and constants) and the
  // new nodes.
  Graph rhs;
  rhs.source = g.source;
  for (const auto& [leaf, v] : m.leaves) rhs.values[v] = g.value(v);
  for (const std::string& root : m.roots) {
    Value v;
    v.name = root;
    rhs.values[root] = v;
  }
  RhsWriter writer(rhs, rule, m);
  try {
    for (size_t k = 0; k < rule.rhs.size(); ++k) writer.write(rule.rhs[k], m.roots[k]);
    rhs.nodes = std::move(writer.nodes());
    infer_shapes(rhs, {.only_untyped = true, .max_fold_elements = 0});
  } catch (const Error&) {
    return std::nullopt;
  }
  if (!writer.elementwise_operands_match()) return std::nullopt;
  for (const std::string& root : m.roots)
    if (rhs.value(root).shape != g.value(root).shape) return std::nullopt;
  // The matched nodes that die: the roots' producers, and those whose outputs only matched nodes read.
  std::map<std::string, int> inside_readers;
  for (size_t i : m.nodes)
    for (const std::string& in : g.nodes[i].inputs) ++inside_readers[in];
  const std::set<std::string> roots(m.roots.begin(), m.roots.end());
  std::vector<const Node*> dying;
  for (size_t i : m.nodes) {
    const Node& n = g.nodes[i];
    const bool dies = std::all_of(n.outputs.begin(), n.outputs.end(), [&](const std::string& o) {
      auto inside = inside_readers.find(o);
      return roots.count(o) || readers.count(o) == (inside == inside_readers.end() ? 0 : inside->second);
    });
    if (dies) dying.push_back(&n);
  }
  // Readers of a root that becomes a Slice's part (graph_cost.h): a Concat that read it in place
  // copies; an element-wise op fused into the conv or matmul that made it is a pass of its own.
  double readers_change = 0;
  for (size_t k = 0; k < m.roots.size(); ++k) {
    const std::string& op = rule.rhs[k]->op;
    if ((op != "split0" && op != "split1") || readers.made_by_slice(m.roots[k])) continue;
    std::set<std::string> after = readers.slice_outputs();
    after.insert(m.roots[k]);
    const bool in_epilogue = readers.epilogue_values().count(m.roots[k]) != 0;
    for (size_t i : readers.nodes(m.roots[k])) {
      const Node& reader = g.nodes[i];
      if (reader.op_type == "Concat")
        readers_change += nodes_cost(g, {&reader}, r, after) - nodes_cost(g, {&reader}, r, readers.slice_outputs());
      else if (in_epilogue && is_elementwise(reader))
        readers_change += nodes_cost(g, {&reader}, r, after);  // was free in the epilogue, now a pass of its own
    }
  }
  // The new Slices that only reshapes and moves read are free, as graph_cost finds in a whole graph.
  std::set<std::string> moved;
  for (const std::string& root : m.roots)
    if (readers.count(root) > 0 && readers.count(root) == static_cast<int>(readers.nodes(root).size()) &&
        std::all_of(readers.nodes(root).begin(), readers.nodes(root).end(),
                    [&](size_t i) { return reshapes_or_moves(g.nodes[i].op_type); }))
      moved.insert(root);
  std::set<std::string> folded;
  for (const auto& [leaf, v] : m.leaves)
    if (readers.constant_values().count(v)) folded.insert(v);
  return graph_cost(rhs, r, moved, folded) - nodes_cost(g, dying, r, readers.slice_outputs(), readers.epilogue_values()) +
         readers_change;
}

std::optional<Graph> apply_match(const Graph& g, const Rule& rule, const Match& m, bool fold) {
  Graph out = g;
  std::map<std::string, Shape> old_shapes;
  for (const std::string& root : m.roots) old_shapes[root] = g.value(root).shape;
  // The roots' producers go; the rest of what the lhs matched goes too unless something else reads it.
  std::set<std::string> roots(m.roots.begin(), m.roots.end());
  std::erase_if(out.nodes, [&](const Node& n) {
    return std::any_of(n.outputs.begin(), n.outputs.end(), [&](const std::string& o) { return roots.count(o) != 0; });
  });
  RhsWriter writer(out, rule, m);
  try {
    for (size_t k = 0; k < rule.rhs.size(); ++k) writer.write(rule.rhs[k], m.roots[k]);
  } catch (const Error&) {
    return std::nullopt;
  }
  for (Node& n : writer.nodes()) out.nodes.push_back(std::move(n));
  if (!sort_topologically(out)) return std::nullopt;  // a leaf depended on a replaced output
  for (const std::string& root : m.roots) out.value(root).typed = false;
  try {
    infer_shapes(out, {.only_untyped = true, .max_fold_elements = fold ? INT64_MAX : 0});
  } catch (const Error&) {
    return std::nullopt;
  }
  if (!writer.elementwise_operands_match()) return std::nullopt;
  for (const auto& [root, shape] : old_shapes)
    if (out.value(root).shape != shape) return std::nullopt;
  remove_dead_nodes(out);
  return out;
}

}  // namespace kiln::subst
