#include "frontend/passes/inline_if.h"

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


// The nodes of one branch of If `node`, renamed into `g` under `prefix`, each with `guards`
// prepended to its own; sets `outputs` to the names of the branch's output values in `g`.
std::vector<Node> splice_branch(Graph& g, const Node& node, const char* branch_name, const std::string& prefix,
                                const std::vector<Guard>& guards, std::vector<std::string>& outputs) {
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
    std::string base = prefix + name, unique = base;
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
    spliced.push_back(std::move(n));
  }
  outputs.clear();
  for (const std::string& o : branch.outputs) {
    auto it = renamed.find(o);
    outputs.push_back(it != renamed.end() ? it->second : o);  // a branch output may be an outer value
    if (!g.has_value(outputs.back())) throw Error(node.label() + ": " + branch_name + " output '" + o + "' is not defined");
  }
  return spliced;
}

// A node of the default domain (or kiln's) that passes on or merges values for If `node`.
Node if_node(const Graph& g, const Node& node, const std::string& name, const char* op, std::vector<std::string> ins,
             const std::string& out) {
  Node n;
  n.name = name;
  n.op_type = op;
  n.domain = std::string(op) == "IfMerge" ? "kiln" : "";
  n.opset = std::string(op) == "IfMerge" ? 1 : g.opsets.count("") ? g.opsets.at("") : node.opset;
  n.inputs = std::move(ins);
  n.outputs = {out};
  n.guards = node.guards;
  return n;
}

}  // namespace

void inline_if(Graph& g, size_t index) {
  const Node node = g.nodes.at(index);
  if (node.inputs.empty() || node.inputs[0].empty()) throw Error(node.label() + ": has no condition input");
  const Value& cond = g.value(node.inputs[0]);
  std::vector<Node> spliced;
  std::vector<std::string> outputs;
  if (cond.constant) {
    if (cond.constant->size() != 1)
      throw Error(node.label() + ": the condition has " + std::to_string(cond.constant->size()) + " elements, not 1");
    const char* branch_name = cond.constant->get_double(0) != 0 ? "then_branch" : "else_branch";
    spliced = splice_branch(g, node, branch_name, node.name + "/", node.guards, outputs);
    // The If's outputs are the branch's, passed on by Identity.
    for (size_t k = 0; k < node.outputs.size(); ++k)
      if (!node.outputs[k].empty())
        spliced.push_back(if_node(g, node, node.name + "/output" + std::to_string(k), "Identity", {outputs[k]}, node.outputs[k]));
  } else {
    if (cond.typed && num_elements(cond.shape) != 1)
      throw Error(node.label() + ": the condition has shape " + shape_str(cond.shape) + ", not one element");
    std::vector<Guard> then_guards = node.guards, else_guards = node.guards;
    then_guards.push_back({node.inputs[0], true});
    else_guards.push_back({node.inputs[0], false});
    std::vector<std::string> then_out, else_out;
    spliced = splice_branch(g, node, "then_branch", node.name + "/then/", then_guards, then_out);
    std::vector<Node> other = splice_branch(g, node, "else_branch", node.name + "/else/", else_guards, else_out);
    spliced.insert(spliced.end(), other.begin(), other.end());
    // Each output picks its branch's value at run time; IfMerge checks that the two agree in type.
    for (size_t k = 0; k < node.outputs.size(); ++k)
      if (!node.outputs[k].empty()) {
        Node merge = if_node(g, node, node.name + "/output" + std::to_string(k), "IfMerge",
                             {node.inputs[0], then_out[k], else_out[k]}, node.outputs[k]);
        merge.attrs["if"] = AttrValue(node.name);
        spliced.push_back(std::move(merge));
      }
  }
  g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(index));
  g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(index), spliced.begin(), spliced.end());
}

}  // namespace kiln
