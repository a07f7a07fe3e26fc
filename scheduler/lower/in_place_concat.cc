#include "scheduler/lower/in_place_concat.h"

#include <algorithm>
#include <map>
#include <set>

#include "frontend/ir/dtype.h"
#include "frontend/ir/tensor.h"
#include "frontend/ops/shape_attributes.h"

namespace kiln::lower {
namespace {

constexpr int64_t kSliceAlign = 64;  // package::kWorkspaceAlign: every buffer starts on it

}  // namespace

std::vector<InPlaceConcat> plan_in_place_concats(const Graph& g, const SubgraphDAG& sdag) {
  std::set<std::string> computed, graph_outputs(g.outputs.begin(), g.outputs.end()), placed;
  for (const Subgraph& sg : sdag.subgraphs) computed.insert(sg.outputs.begin(), sg.outputs.end());
  std::vector<InPlaceConcat> plans;
  for (size_t k = 0; k < sdag.subgraphs.size(); ++k) {
    const Subgraph& sg = sdag.subgraphs[k];
    if (sg.nodes.empty() || sg.outputs.size() != 1 || graph_outputs.count(sg.outputs[0])) continue;
    const Node& n = g.nodes[static_cast<size_t>(sg.nodes[0])];
    if (n.op_type != "Concat" || !n.domain.empty() || n.outputs.size() != 1) continue;
    // Identities after it (an inference-time Dropout) pass the same bytes on.
    std::string last = n.outputs[0];
    for (size_t i = 1; i < sg.nodes.size() && !last.empty(); ++i) {
      const Node& m = g.nodes[static_cast<size_t>(sg.nodes[i])];
      last = m.op_type == "Identity" && m.domain.empty() && m.inputs.size() == 1 && m.inputs[0] == last ? m.outputs[0] : "";
    }
    if (last != sg.outputs[0]) continue;
    const Value& out = g.value(last);
    const auto rank = static_cast<int64_t>(out.shape.size());
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) continue;
    if (num_elements(Shape(out.shape.begin(), out.shape.begin() + axis)) != 1) continue;
    InPlaceConcat plan{static_cast<int>(k), last, {}};
    std::set<std::string> seen;
    int64_t offset = 0;
    bool ok = true;
    for (const std::string& in : n.inputs) {
      const Value& v = g.value(in);
      const int64_t count = num_elements(v.shape);
      ok = !in.empty() && computed.count(in) && !graph_outputs.count(in) && !placed.count(in) && seen.insert(in).second &&
           count > 0 && v.dtype == out.dtype && offset % kSliceAlign == 0;
      if (!ok) break;
      plan.inputs.push_back({in, offset});
      offset += count * static_cast<int64_t>(dtype_size(v.dtype));
    }
    if (!ok || plan.inputs.empty()) continue;
    for (const auto& s : plan.inputs) placed.insert(s.value);
    plans.push_back(std::move(plan));
  }
  return plans;
}

std::vector<InPlaceConcat> plan_in_place_if_merges(const Graph& g, const SubgraphDAG& sdag,
                                                   const std::vector<InPlaceConcat>& placed_already) {
  std::set<std::string> graph_outputs(g.outputs.begin(), g.outputs.end()), placed;
  for (const InPlaceConcat& c : placed_already)
    for (const auto& s : c.inputs) placed.insert(s.value);
  std::map<std::string, const Subgraph*> producer;
  for (const Subgraph& sg : sdag.subgraphs)
    for (const std::string& o : sg.outputs) producer[o] = &sg;
  // A side may share the merge's buffer when only its branch computes it: the other branch, which
  // writes the other side there, then never runs in the same call.
  auto only_in_branch = [&](const std::string& v, const Guard& branch) {
    auto p = producer.find(v);
    return p != producer.end() && !graph_outputs.count(v) && !placed.count(v) &&
           std::find(p->second->guards.begin(), p->second->guards.end(), branch) != p->second->guards.end();
  };
  std::vector<InPlaceConcat> plans;
  for (size_t k = 0; k < sdag.subgraphs.size(); ++k) {
    const Subgraph& sg = sdag.subgraphs[k];
    if (sg.nodes.size() != 1 || sg.outputs.size() != 1 || graph_outputs.count(sg.outputs[0])) continue;
    const Node& n = g.nodes[static_cast<size_t>(sg.nodes[0])];
    if (n.op_type != "IfMerge" || n.domain != "kiln" || n.inputs.size() != 3 || n.outputs[0] != sg.outputs[0]) continue;
    const std::string &cond = n.inputs[0], &then_value = n.inputs[1], &else_value = n.inputs[2];
    if (then_value == else_value || num_elements(g.value(n.outputs[0]).shape) == 0) continue;
    if (!only_in_branch(then_value, {cond, true}) || !only_in_branch(else_value, {cond, false})) continue;
    placed.insert(then_value);
    placed.insert(else_value);
    plans.push_back({static_cast<int>(k), n.outputs[0], {{then_value, 0}, {else_value, 0}}});
  }
  return plans;
}

namespace {

bool reshapes_bytes(const Node& n) {
  static const std::set<std::string> kOps = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"};
  return n.domain.empty() && kOps.count(n.op_type) != 0;
}

// The value subgraph `sg` is a view of and the byte offset of the view, when it is one: a Slice of
// one contiguous run alone, or a chain of ops that only reshape (each reading the one before).
std::optional<std::pair<std::string, int64_t>> view_of(const Graph& g, const Subgraph& sg) {
  const Node& first = g.nodes[static_cast<size_t>(sg.nodes.front())];
  const Node& last = g.nodes[static_cast<size_t>(sg.nodes.back())];
  if (last.outputs.empty() || last.outputs[0] != sg.outputs[0]) return std::nullopt;
  if (sg.nodes.size() == 1 && first.op_type == "Slice" && first.domain.empty()) {
    const std::optional<int64_t> at = contiguous_slice_offset(g, first);
    if (!at) return std::nullopt;
    return std::make_pair(first.inputs[0], *at * static_cast<int64_t>(dtype_size(g.value(first.inputs[0]).dtype)));
  }
  for (size_t i = 0; i < sg.nodes.size(); ++i) {
    const Node& n = g.nodes[static_cast<size_t>(sg.nodes[i])];
    if (!reshapes_bytes(n) || (i > 0 && n.inputs[0] != g.nodes[static_cast<size_t>(sg.nodes[i - 1])].outputs[0])) return std::nullopt;
  }
  return std::make_pair(first.inputs[0], int64_t{0});
}

}  // namespace

std::vector<InPlaceConcat> plan_in_place_slices(const Graph& g, const SubgraphDAG& sdag,
                                                const std::vector<InPlaceConcat>& placed_already) {
  std::set<std::string> computed, graph_outputs(g.outputs.begin(), g.outputs.end()), placed;
  for (const Subgraph& sg : sdag.subgraphs)
    if (sg.guards.empty()) computed.insert(sg.outputs.begin(), sg.outputs.end());
  for (const InPlaceConcat& c : placed_already)
    for (const auto& s : c.inputs) placed.insert(s.value);
  std::vector<InPlaceConcat> plans;
  for (size_t k = 0; k < sdag.subgraphs.size(); ++k) {
    const Subgraph& sg = sdag.subgraphs[k];
    if (sg.nodes.empty() || sg.outputs.size() != 1 || !sg.guards.empty() || graph_outputs.count(sg.outputs[0])) continue;
    const std::string& part = sg.outputs[0];
    const auto view = view_of(g, sg);
    if (!view) continue;
    const auto& [whole, offset] = *view;
    if (!computed.count(whole) || graph_outputs.count(whole) || placed.count(part)) continue;
    if (num_elements(g.value(part).shape) == 0 || g.value(whole).dtype != g.value(part).dtype) continue;
    if (offset % kSliceAlign != 0) continue;
    placed.insert(part);
    plans.push_back({static_cast<int>(k), whole, {{part, offset}}});
  }
  return plans;
}

std::vector<InPlaceConcat> plan_in_place_outputs(const Graph& g, const SubgraphDAG& sdag) {
  std::vector<InPlaceConcat> plans = plan_in_place_concats(g, sdag);
  std::vector<InPlaceConcat> merges = plan_in_place_if_merges(g, sdag, plans);
  plans.insert(plans.end(), merges.begin(), merges.end());
  std::vector<InPlaceConcat> slices = plan_in_place_slices(g, sdag, plans);
  plans.insert(plans.end(), slices.begin(), slices.end());
  std::sort(plans.begin(), plans.end(), [](const InPlaceConcat& a, const InPlaceConcat& b) { return a.subgraph < b.subgraph; });
  return plans;
}

std::set<int> subgraphs_of(const std::vector<InPlaceConcat>& plans) {
  std::set<int> ids;
  for (const InPlaceConcat& p : plans) ids.insert(p.subgraph);
  return ids;
}

}  // namespace kiln::lower
