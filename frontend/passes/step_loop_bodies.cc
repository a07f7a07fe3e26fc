#include "frontend/passes/step_loop_bodies.h"

#include <algorithm>

#include "frontend/ir/step_loop.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/passes/node_emitter.h"
#include "frontend/passes/splice_subgraph.h"
#include "frontend/passes/remove_dead_nodes.h"

namespace kiln {

int sink_constant_invariants(Graph& g) {
  int moved = 0;
  for (Node& n : g.nodes) {
    if (!is_step_loop(n)) continue;
    const StepLoop loop = read_step_loop(n);
    auto body = std::make_shared<Graph>(*loop.body);
    std::vector<std::string> inputs(n.inputs.begin(), n.inputs.begin() + loop.carried);
    std::vector<std::string> body_inputs(body->inputs.begin(), body->inputs.begin() + loop.carried + 1);
    for (size_t i = static_cast<size_t>(loop.carried); i < n.inputs.size(); ++i) {
      const std::string& name = body->inputs[i + 1];
      if (const auto& k = g.value(n.inputs[i]).constant) {
        body->value(name).constant = k;
        ++moved;
        continue;
      }
      inputs.push_back(n.inputs[i]);
      body_inputs.push_back(name);
    }
    if (inputs.size() == n.inputs.size()) continue;
    body->inputs = std::move(body_inputs);
    infer_shapes(*body);
    remove_dead_nodes(*body);
    n.inputs = std::move(inputs);
    n.attrs["body"] = SubgraphAttr{std::move(body)};
  }
  return moved;
}

int unroll_step_loops(Graph& g) {
  std::vector<Node> nodes;
  int replaced = 0;
  for (const Node& node : std::vector<Node>(g.nodes)) {
    if (!is_step_loop(node)) {
      nodes.push_back(node);
      continue;
    }
    const StepLoop loop = read_step_loop(node);
    const Graph& body = *loop.body;
    const auto carried = static_cast<size_t>(loop.carried);
    check_expansion(g, static_cast<size_t>(loop.trip_count) * (body.nodes.size() + 1), node.label());
    NodeEmitter out(g, node);
    std::vector<std::string> state(node.inputs.begin(), node.inputs.begin() + loop.carried);
    std::vector<std::vector<std::string>> scans(body.outputs.size() - carried);
    for (int64_t k = 0; k < loop.trip_count; ++k) {
      std::vector<std::string> bound{out.int64(k)};
      bound.insert(bound.end(), state.begin(), state.end());
      bound.insert(bound.end(), node.inputs.begin() + loop.carried, node.inputs.end());
      // Whether iteration k runs, when that is decided at run time: it then runs under that guard,
      // and each carried value is the iteration's where it ran, the one before where it did not.
      std::string runs;
      if (loop.trip_limit) runs = out.op("Less", {out.int64(k), node.inputs[carried]});
      if (loop.condition) runs = runs.empty() ? state[0] : out.op("And", {runs, state[0]});
      std::vector<Guard> guards = node.guards;
      if (!runs.empty()) guards.push_back({runs, true});
      nodes.insert(nodes.end(), out.nodes().begin(), out.nodes().end());
      out.nodes().clear();
      SplicedSubgraph it = splice_subgraph(g, body, node.name + "/iter" + std::to_string(k) + "/", guards, bound, node.label());
      nodes.insert(nodes.end(), it.nodes.begin(), it.nodes.end());
      for (size_t i = 0; i < carried; ++i)
        state[i] = runs.empty() ? it.outputs[i] : out.op("IfMerge", {runs, it.outputs[i], state[i]}, {{"if", AttrValue(node.label())}}, "", "kiln");
      for (size_t j = 0; j < scans.size(); ++j) scans[j].push_back(out.op("Unsqueeze", {it.outputs[carried + j], out.ints({0})}));
      nodes.insert(nodes.end(), out.nodes().begin(), out.nodes().end());
      out.nodes().clear();
    }
    for (size_t i = 0; i < carried; ++i)
      if (!node.outputs[i].empty()) out.op("Identity", {state[i]}, {}, node.outputs[i]);
    for (size_t j = 0; j < scans.size(); ++j) {
      if (node.outputs[carried + j].empty()) continue;
      if (loop.scan_reverse[j]) std::reverse(scans[j].begin(), scans[j].end());
      out.op("Concat", scans[j], {{"axis", AttrValue(int64_t{0})}}, node.outputs[carried + j]);
    }
    nodes.insert(nodes.end(), out.nodes().begin(), out.nodes().end());
    ++replaced;
  }
  if (!replaced) return 0;
  g.nodes = std::move(nodes);
  infer_shapes(g);
  return replaced;
}

void rewrite_step_loop_bodies(Graph& g, const std::function<void(Graph&)>& pass) {
  for (Node& n : g.nodes) {
    if (!is_step_loop(n)) continue;
    auto body = std::make_shared<Graph>(*read_step_loop(n).body);
    pass(*body);
    n.attrs["body"] = SubgraphAttr{std::move(body)};
  }
}

}  // namespace kiln
