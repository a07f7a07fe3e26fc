#include "frontend/quantize/qdq_plan.h"

#include <algorithm>
#include <set>

namespace kiln {
namespace {

struct GraphIndex {
  std::map<std::string, const Node*> producer;
  std::map<std::string, std::vector<const Node*>> readers;
  std::set<std::string> graph_outputs;

  explicit GraphIndex(const Graph& g) : graph_outputs(g.outputs.begin(), g.outputs.end()) {
    for (const Node& n : g.nodes) {
      for (const std::string& o : n.outputs)
        if (!o.empty()) producer[o] = &n;
      for (const std::string& i : n.inputs)
        if (!i.empty()) readers[i].push_back(&n);
    }
  }
  // The one node reading `v`, when nothing else (the graph's outputs included) does.
  const Node* sole_reader(const std::string& v) const {
    auto it = readers.find(v);
    if (it == readers.end() || it->second.size() != 1 || graph_outputs.count(v)) return nullptr;
    return it->second[0];
  }
};

bool plain(const Node& n) { return n.domain.empty() && n.guards.empty(); }

const Tensor* float_constant(const Graph& g, const std::string& name) {
  if (name.empty() || !g.has_value(name)) return nullptr;
  const Value& v = g.value(name);
  return v.constant && v.constant->dtype() == DType::Float32 ? v.constant.get() : nullptr;
}

// An activation: a float32 tensor computed at run time (a graph input or a node's output).
bool is_activation(const Graph& g, const std::string& name) {
  if (name.empty() || !g.has_value(name)) return false;
  const Value& v = g.value(name);
  return !v.constant && (!v.typed || v.dtype == DType::Float32);
}

// The output-channel axis of the weight of a node kiln quantizes; nothing when it is not one.
std::optional<int64_t> weight_axis(const Graph& g, const Node& n) {
  if (!plain(n) || n.inputs.size() < 2 || !is_activation(g, n.inputs[0])) return std::nullopt;
  const Tensor* w = float_constant(g, n.inputs[1]);
  if (!w) return std::nullopt;
  const bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
  if (n.op_type == "Conv") {
    if (w->rank() < 3) return std::nullopt;
    if (has_bias) {
      const Tensor* b = float_constant(g, n.inputs[2]);
      if (!b || b->size() != w->shape()[0]) return std::nullopt;
    }
    return 0;
  }
  if (n.op_type == "MatMul") return w->rank() == 2 ? std::optional<int64_t>(1) : std::nullopt;
  if (n.op_type == "Gemm") {
    if (w->rank() != 2 || n.attr_int("transA", 0) != 0 || n.attr_float("alpha", 1.0) != 1.0) return std::nullopt;
    const int64_t axis = n.attr_int("transB", 0) != 0 ? 0 : 1;
    if (has_bias) {
      const Tensor* c = float_constant(g, n.inputs[2]);
      if (!c || c->size() != w->shape()[static_cast<size_t>(axis)] || n.attr_float("beta", 1.0) != 1.0) return std::nullopt;
    }
    return axis;
  }
  return std::nullopt;
}

// A Relu, or a Clip whose lower bound is exactly 0 (and whose upper bound, if any, is a constant).
bool is_absorbable_relu(const Graph& g, const Node& n) {
  if (!plain(n) || n.outputs.size() != 1) return false;
  if (n.op_type == "Relu") return true;
  if (n.op_type != "Clip") return false;
  if (n.opset < 11) return n.attr_float("min", -3.4028234663852886e38) == 0.0;
  const Tensor* lo = n.inputs.size() > 1 ? float_constant(g, n.inputs[1]) : nullptr;
  const bool hi_ok = n.inputs.size() < 3 || n.inputs[2].empty() || float_constant(g, n.inputs[2]);
  return lo && lo->size() == 1 && lo->get_double(0) == 0.0 && hi_ok;
}

bool passes_codes_through(const Node& n) {
  static const std::set<std::string> ops = {"MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze",
                                            "Unsqueeze", "Identity", "Dropout"};
  if (!plain(n) || !ops.count(n.op_type)) return false;
  // MaxPool's indices and Dropout's mask are other tensors: only the data output may be in use.
  return n.outputs.size() == 1 || std::all_of(n.outputs.begin() + 1, n.outputs.end(), [](const std::string& o) { return o.empty(); });
}

}  // namespace

QdqPlan plan_qdq(const Graph& g, bool per_channel) {
  const GraphIndex index(g);
  QdqPlan plan;
  std::set<std::string> wanted;
  auto want = [&](const std::string& v) {
    if (wanted.insert(v).second) plan.activations.push_back(v);
  };
  for (const Node& n : g.nodes) {
    auto axis = weight_axis(g, n);
    if (!axis) continue;
    QuantizedNode q{n.outputs[0], n.op_type, "", *axis, per_channel};
    want(n.inputs[0]);
    std::string out = n.outputs[0];
    if (const Node* r = index.sole_reader(out); r && is_absorbable_relu(g, *r) && r->inputs[0] == out) {
      q.absorbed = r->outputs[0];
      out = r->outputs[0];
    }
    want(out);
    plan.nodes.push_back(q);
  }
  // An activation a pass-through node computes from a quantized value (directly or through more of
  // them) takes that value's parameters, and the values between are quantized with them too.
  auto source_of = [&](const std::string& v, std::vector<std::string>& chain) -> std::string {
    std::string cur = v;
    for (;;) {
      auto p = index.producer.find(cur);
      if (p == index.producer.end() || !passes_codes_through(*p->second)) return "";
      cur = p->second->inputs[0];
      if (wanted.count(cur)) return cur;
      chain.push_back(cur);
    }
  };
  // Graph order, so a chain's start has its source before the chain is resolved.
  std::map<std::string, size_t> produced_at;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& o : g.nodes[i].outputs) produced_at[o] = i + 1;
  auto earlier = [&](const std::string& a, const std::string& b) {  // graph inputs (0) first
    auto at = [&](const std::string& v) { auto it = produced_at.find(v); return it == produced_at.end() ? size_t{0} : it->second; };
    return at(a) < at(b);
  };
  std::vector<std::string> by_order = plan.activations;
  std::stable_sort(by_order.begin(), by_order.end(), earlier);
  for (const std::string& v : by_order) {
    std::vector<std::string> chain;
    const std::string src = source_of(v, chain);
    if (src.empty()) {
      plan.params_from[v] = v;
      continue;
    }
    const std::string root = plan.params_from.count(src) ? plan.params_from[src] : src;
    plan.params_from[v] = root;
    for (const std::string& c : chain) {
      want(c);
      plan.params_from[c] = root;
    }
  }
  std::stable_sort(plan.activations.begin(), plan.activations.end(), earlier);
  return plan;
}

}  // namespace kiln
