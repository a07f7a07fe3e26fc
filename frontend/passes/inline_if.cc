#include "frontend/passes/inline_if.h"

#include "frontend/ir/error.h"
#include "frontend/passes/node_emitter.h"
#include "frontend/passes/splice_subgraph.h"

namespace kiln {
namespace {

// The nodes of one branch of If `node` (splice_subgraph.h), each with `guards` before its own.
SplicedSubgraph splice_branch(Graph& g, const Node& node, const char* branch_name, const std::string& prefix,
                              const std::vector<Guard>& guards) {
  const Graph& branch = subgraph_attr(node, branch_name);
  if (branch.outputs.size() != node.outputs.size())
    throw Error(node.label() + ": " + branch_name + " has " + std::to_string(branch.outputs.size()) +
                " outputs, the If " + std::to_string(node.outputs.size()));
  return splice_subgraph(g, branch, prefix, guards, {}, node.label() + ": " + branch_name);
}

}  // namespace

void inline_if(Graph& g, size_t index) {
  const Node node = g.nodes.at(index);
  if (node.inputs.empty() || node.inputs[0].empty()) throw Error(node.label() + ": has no condition input");
  const Value& cond = g.value(node.inputs[0]);
  std::vector<Node> spliced;
  NodeEmitter passes(g, node);  // the Identities or IfMerges that give the If's outputs
  if (cond.constant) {
    if (cond.constant->size() != 1)
      throw Error(node.label() + ": the condition has " + std::to_string(cond.constant->size()) + " elements, not 1");
    const char* branch_name = cond.constant->get_double(0) != 0 ? "then_branch" : "else_branch";
    SplicedSubgraph taken = splice_branch(g, node, branch_name, node.name + "/", node.guards);
    spliced = std::move(taken.nodes);
    // The If's outputs are the branch's, passed on by Identity.
    for (size_t k = 0; k < node.outputs.size(); ++k)
      if (!node.outputs[k].empty()) passes.op("Identity", {taken.outputs[k]}, {}, node.outputs[k]);
  } else {
    if (cond.typed && num_elements(cond.shape) != 1)
      throw Error(node.label() + ": the condition has shape " + shape_str(cond.shape) + ", not one element");
    std::vector<Guard> then_guards = node.guards, else_guards = node.guards;
    then_guards.push_back({node.inputs[0], true});
    else_guards.push_back({node.inputs[0], false});
    SplicedSubgraph then_part = splice_branch(g, node, "then_branch", node.name + "/then/", then_guards);
    SplicedSubgraph else_part = splice_branch(g, node, "else_branch", node.name + "/else/", else_guards);
    spliced = std::move(then_part.nodes);
    spliced.insert(spliced.end(), else_part.nodes.begin(), else_part.nodes.end());
    const std::vector<std::string>& then_out = then_part.outputs;
    const std::vector<std::string>& else_out = else_part.outputs;
    // Each output picks its branch's value at run time; IfMerge checks that the two agree in type.
    for (size_t k = 0; k < node.outputs.size(); ++k)
      if (!node.outputs[k].empty())
        passes.op("IfMerge", {node.inputs[0], then_out[k], else_out[k]}, {{"if", AttrValue(node.label())}}, node.outputs[k], "kiln");
  }
  spliced.insert(spliced.end(), passes.nodes().begin(), passes.nodes().end());
  replace_node(g, index, spliced);
}

}  // namespace kiln
