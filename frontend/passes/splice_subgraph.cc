#include "frontend/passes/splice_subgraph.h"

#include <map>
#include <memory>
#include <set>

#include "frontend/ir/error.h"

namespace kiln {
namespace {

// `sub` with every read of a renamed outer value renamed too (a nested If's branches may read values
// of the body being spliced).
std::shared_ptr<const Graph> renamed_outer_reads(const Graph& sub, const std::map<std::string, std::string>& renamed) {
  auto out = std::make_shared<Graph>(sub);
  const std::vector<std::string> outer = outer_references(sub);
  const std::set<std::string> reads(outer.begin(), outer.end());
  auto rename = [&](std::string& name) {
    auto it = renamed.find(name);
    if (it != renamed.end() && reads.count(name)) name = it->second;
  };
  for (Node& n : out->nodes) {
    for (std::string& in : n.inputs) rename(in);
    for (auto& [key, value] : n.attrs)
      if (auto* nested = std::get_if<SubgraphAttr>(&value); nested && nested->graph)
        nested->graph = renamed_outer_reads(*nested->graph, renamed);
  }
  for (std::string& o : out->outputs) rename(o);
  return out;
}

}  // namespace

void check_expansion(const Graph& g, size_t added, const std::string& owner) {
  if (g.nodes.size() + added > kMaxExpandedNodes)
    throw Unsupported(owner + ": unrolled or expanded, the graph would pass " + std::to_string(kMaxExpandedNodes) +
                      " nodes, the most kiln compiles (a loop in the generated code is issue 19's next step)");
}

const Graph& subgraph_attr(const Node& node, const std::string& name) {
  auto attr = node.attrs.find(name);
  const auto* sub = attr == node.attrs.end() ? nullptr : std::get_if<SubgraphAttr>(&attr->second);
  if (!sub || !sub->graph) throw Error(node.label() + ": attribute '" + name + "' is missing or not a graph");
  return *sub->graph;
}

SplicedSubgraph splice_subgraph(Graph& g, const Graph& body, const std::string& prefix, const std::vector<Guard>& guards,
                                const std::vector<std::string>& inputs, const std::string& owner) {
  check_expansion(g, body.nodes.size(), owner);
  if (body.inputs.size() != inputs.size())
    throw Error(owner + ": its body declares " + std::to_string(body.inputs.size()) + " inputs, expected " +
                std::to_string(inputs.size()));
  // Values the body defines get names of their own in `g`; its inputs name the outer values bound to
  // them; values it reads from outside keep theirs.
  std::map<std::string, std::string> renamed;
  for (size_t i = 0; i < inputs.size(); ++i) renamed[body.inputs[i]] = inputs[i];
  auto fresh = [&](const std::string& name) {
    std::string base = prefix + name, unique = base;
    for (int k = 1; g.has_value(unique); ++k) unique = base + "." + std::to_string(k);
    g.values[unique].name = unique;
    renamed[name] = unique;
    return unique;
  };
  for (const auto& [name, v] : body.values)
    if (v.constant) {
      const std::string n = fresh(name);
      Value& to = g.values[n];
      to = v;
      to.name = n;
    }
  SplicedSubgraph out;
  for (const Node& b : body.nodes) {
    Node n = b;
    n.name = prefix + b.name;
    n.guards = guards;
    n.guards.insert(n.guards.end(), b.guards.begin(), b.guards.end());
    for (std::string& in : n.inputs) {
      auto it = renamed.find(in);
      if (it != renamed.end()) in = it->second;
    }
    for (auto& [key, value] : n.attrs)
      if (auto* nested = std::get_if<SubgraphAttr>(&value); nested && nested->graph)
        nested->graph = renamed_outer_reads(*nested->graph, renamed);
    for (std::string& o : n.outputs)
      if (!o.empty()) o = fresh(o);
    out.nodes.push_back(std::move(n));
  }
  for (const std::string& o : body.outputs) {
    auto it = renamed.find(o);
    out.outputs.push_back(it != renamed.end() ? it->second : o);  // an output may be an outer value
    if (!g.has_value(out.outputs.back())) throw Error(owner + ": its body's output '" + o + "' is not defined");
  }
  return out;
}

}  // namespace kiln
