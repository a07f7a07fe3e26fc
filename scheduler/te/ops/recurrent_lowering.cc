// LSTM, GRU and RNN as tensor expressions: the node's expansion (frontend/passes/expand_recurrent.h)
// lowered node by node. The compile pipeline expands these nodes in the graph before partitioning,
// so their MatMuls become tasks of their own; this lowering serves whoever lowers a graph that still
// has them (the te engine), with the same expansion, so both compute the same thing.
#include "frontend/passes/expand_recurrent.h"
#include "frontend/passes/infer_shapes.h"
#include "scheduler/te/lower_graph.h"
#include "scheduler/te/ops/nn_lowering_common.h"

namespace kiln::te::nn_lower {
namespace {

void lower_recurrent(LowerContext& c) {
  const Node& n = c.node();
  // The node alone in a graph of its own, inputs typed (constants kept, so their work folds).
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
  expand_recurrent(g);
  auto tensor_of = [&](const std::string& name) -> TensorRef {
    auto it = env.find(name);
    if (it != env.end()) return it->second;
    const Value& v = g.value(name);
    if (!v.constant) c.fail("value '" + name + "' of the expansion has no producer");
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

}  // namespace

void register_recurrent_lowerings(LoweringRegistry& r) {
  for (const char* type : {"LSTM", "GRU", "RNN"}) r.add({type, "", lower_recurrent});
}

}  // namespace kiln::te::nn_lower
