#include "scheduler/te/ops/rewritten_lowering.h"

#include "scheduler/te/lower_graph.h"

namespace kiln::te {

void lower_through_rewrite(LowerContext& c, const std::function<void(Graph&)>& rewrite) {
  const Node& n = c.node();
  Graph g;
  g.name = n.name;
  g.source = n.label();
  std::map<std::string, TensorRef> env;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (!c.has_input(i) || g.has_value(n.inputs[i])) continue;
    Value& v = g.values[n.inputs[i]];
    v.name = n.inputs[i];
    v.dtype = c.dtype(i);
    v.shape = c.shape(i);
    v.typed = true;
    if (const Tensor* k = c.constant(i)) v.constant = std::make_shared<const Tensor>(*k);
    else g.inputs.push_back(v.name);
    env[v.name] = c.input(i);
  }
  for (const std::string& out : n.outputs)
    if (!out.empty()) {
      g.values[out].name = out;
      g.outputs.push_back(out);
    }
  g.nodes.push_back(n);
  rewrite(g);
  auto tensor_of = [&](const std::string& name) -> TensorRef {
    auto it = env.find(name);
    if (it != env.end()) return it->second;
    const Value& v = g.value(name);
    if (!v.constant) c.fail("value '" + name + "' of the rewritten node has no producer");
    return env[name] = placeholder(name, v.dtype, v.shape, v.constant);
  };
  for (const Node& part : g.nodes) {
    bool folded = true;
    for (const std::string& o : part.outputs) folded &= o.empty() || g.value(o).constant != nullptr;
    if (!folded) lower_node(g, part, tensor_of, env);
  }
  for (size_t i = 0; i < n.outputs.size(); ++i)
    if (!n.outputs[i].empty()) c.set_output(i, tensor_of(n.outputs[i]));
}

}  // namespace kiln::te
