#include "frontend/passes/inline_constant_if.h"

#include <map>
#include <memory>
#include <set>

#include "frontend/ir/error.h"

namespace kiln {
namespace {

// `sub` with every read of a renamed outer value renamed too (a nested If's branches may read values
// of the branch being inlined).
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

void inline_constant_if(Graph& g, size_t index) {
  const Node node = g.nodes.at(index);
  if (node.inputs.empty() || node.inputs[0].empty()) throw Error(node.label() + ": has no condition input");
  const Value& cond = g.value(node.inputs[0]);
  if (!cond.constant)
    throw Unsupported(node.label() + ": its condition '" + node.inputs[0] +
                      "' depends on the input data; only an If whose condition is known at compile time is supported");
  if (cond.constant->size() != 1)
    throw Error(node.label() + ": the condition has " + std::to_string(cond.constant->size()) +
                " elements, not 1");
  const char* branch_name = cond.constant->get_double(0) != 0 ? "then_branch" : "else_branch";
  auto attr = node.attrs.find(branch_name);
  const auto* branch_attr = attr == node.attrs.end() ? nullptr : std::get_if<SubgraphAttr>(&attr->second);
  if (!branch_attr || !branch_attr->graph)
    throw Error(node.label() + ": attribute '" + branch_name + "' is missing or not a graph");
  const Graph& branch = *branch_attr->graph;
  if (branch.outputs.size() != node.outputs.size())
    throw Error(node.label() + ": " + branch_name + " has " + std::to_string(branch.outputs.size()) +
                " outputs, the If " + std::to_string(node.outputs.size()));

  // Values the branch defines get names of their own in `g`; values it reads from outside keep theirs.
  std::map<std::string, std::string> renamed;
  auto fresh = [&](const std::string& name) {
    std::string base = node.name + "/" + name, unique = base;
    for (int k = 1; g.has_value(unique); ++k) unique = base + "." + std::to_string(k);
    g.values[unique].name = unique;
    renamed[name] = unique;
    return unique;
  };
  for (const auto& [name, v] : branch.values)
    if (v.constant) {
      const std::string n = fresh(name);
      Value& to = g.values[n];
      to = v;
      to.name = n;
    }
  std::vector<Node> spliced;
  for (const Node& b : branch.nodes) {
    Node n = b;
    n.name = node.name + "/" + b.name;
    for (std::string& in : n.inputs) {
      auto it = renamed.find(in);
      if (it != renamed.end()) in = it->second;
    }
    for (auto& [key, value] : n.attrs)
      if (auto* nested = std::get_if<SubgraphAttr>(&value); nested && nested->graph)
        nested->graph = renamed_outer_reads(*nested->graph, renamed);
    for (std::string& o : n.outputs)
      if (!o.empty()) o = fresh(o);
    spliced.push_back(std::move(n));
  }
  // The If's outputs are the branch's, passed on by Identity (a branch output may be an outer value).
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    if (node.outputs[k].empty()) continue;
    auto it = renamed.find(branch.outputs[k]);
    Node id;
    id.name = node.name + "/output" + std::to_string(k);
    id.op_type = "Identity";
    id.opset = g.opsets.count("") ? g.opsets.at("") : node.opset;
    id.inputs = {it != renamed.end() ? it->second : branch.outputs[k]};
    id.outputs = {node.outputs[k]};
    if (!g.has_value(id.inputs[0])) throw Error(node.label() + ": " + branch_name + " output '" + branch.outputs[k] + "' is not defined");
    spliced.push_back(std::move(id));
  }
  g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(index));
  g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(index), spliced.begin(), spliced.end());
}

}  // namespace kiln
