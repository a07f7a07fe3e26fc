#include "frontend/passes/step_loop_bodies.h"

#include "frontend/ir/step_loop.h"
#include "frontend/passes/infer_shapes.h"
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

void rewrite_step_loop_bodies(Graph& g, const std::function<void(Graph&)>& pass) {
  for (Node& n : g.nodes) {
    if (!is_step_loop(n)) continue;
    auto body = std::make_shared<Graph>(*read_step_loop(n).body);
    pass(*body);
    n.attrs["body"] = SubgraphAttr{std::move(body)};
  }
}

}  // namespace kiln
