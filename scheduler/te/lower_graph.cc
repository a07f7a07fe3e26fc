#include "scheduler/te/lower_graph.h"

#include "scheduler/te/narrow_codes.h"
#include "scheduler/te/op_lowering.h"

namespace kiln::te {

void lower_node(const Graph& g, const Node& n, const std::function<TensorRef(const std::string&)>& tensor_of,
                std::map<std::string, TensorRef>& env) {
  const OpLowering* l = find_lowering(n.domain, n.op_type);
  if (!l) throw Unsupported(g.source + ": " + n.label() + ": no tensor-expression lowering yet");
  std::vector<TensorRef> ins;
  std::vector<const Tensor*> consts;
  std::vector<DType> in_dtypes;
  for (const auto& in : n.inputs) {
    ins.push_back(in.empty() ? nullptr : tensor_of(in));
    consts.push_back(in.empty() ? nullptr : g.value(in).constant.get());
    in_dtypes.push_back(in.empty() ? DType::Undefined : g.value(in).dtype);
  }
  std::vector<DType> out_dtypes;
  std::vector<Shape> out_shapes;
  for (const auto& o : n.outputs) {
    out_dtypes.push_back(o.empty() ? DType::Undefined : g.value(o).dtype);
    out_shapes.push_back(o.empty() ? Shape{} : g.value(o).shape);
  }
  LowerContext ctx(n, std::move(ins), std::move(consts), std::move(in_dtypes), std::move(out_dtypes), std::move(out_shapes));
  try {
    l->lower(ctx);
  } catch (const Unsupported& e) {
    throw Unsupported(g.source + ": " + e.what());
  } catch (const Error& e) {
    throw Error(g.source + ": " + e.what());
  }
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    if (n.outputs[i].empty()) continue;
    if (!ctx.outputs()[i]) throw Error(g.source + ": " + n.label() + ": lowering set no output " + std::to_string(i));
    env[n.outputs[i]] = ctx.outputs()[i];
  }
}

LoweredGraph lower_graph(const Graph& g) {
  LoweredGraph lg;
  std::map<std::string, TensorRef> env;
  for (const std::string& in : g.inputs) {
    const Value& v = g.value(in);
    const StoredInput s = stored_input(in, v.dtype, v.shape, nullptr);
    lg.inputs[in] = s.placeholder;
    env[in] = s.codes;
  }
  auto tensor_of = [&](const std::string& name) -> TensorRef {
    auto it = env.find(name);
    if (it != env.end()) return it->second;
    const Value& v = g.value(name);
    if (!v.constant) throw Error(g.source + ": value '" + name + "' has no producer in the lowered graph");
    return env[name] = stored_input(name, v.dtype, v.shape, v.constant).codes;
  };
  for (const Node& n : g.nodes) {
    bool all_constant = true;
    for (const auto& o : n.outputs)
      if (!o.empty() && !g.value(o).constant) all_constant = false;
    if (all_constant) continue;
    lower_node(g, n, tensor_of, env);
  }
  for (const std::string& o : g.outputs) lg.outputs.push_back(stored_output(o, tensor_of(o), g.value(o).dtype));
  lg.dag = make_dag(lg.outputs);
  return lg;
}

}  // namespace kiln::te
