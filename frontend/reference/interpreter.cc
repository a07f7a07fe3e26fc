#include "frontend/reference/interpreter.h"

#include "frontend/ops/op_registry.h"

namespace kiln {

std::vector<Tensor> run_reference(const Graph& g, const std::map<std::string, Tensor>& inputs) {
  std::map<std::string, Tensor> env;
  for (const std::string& name : g.inputs) {
    auto it = inputs.find(name);
    if (it == inputs.end()) throw Error(g.source + ": no value given for graph input '" + name + "'");
    const Value& v = g.value(name);
    if (it->second.dtype() != v.dtype || it->second.shape() != v.shape)
      throw Error(g.source + ": graph input '" + name + "' expects " + dtype_name(v.dtype) + " " + shape_str(v.shape) +
                  ", given " + dtype_name(it->second.dtype()) + " " + shape_str(it->second.shape()));
    env[name] = it->second;
  }
  auto lookup = [&](const std::string& name) -> const Tensor* {
    auto it = env.find(name);
    if (it != env.end()) return &it->second;
    const Value& v = g.value(name);
    if (v.constant) return v.constant.get();
    throw Error(g.source + ": value '" + name + "' was not computed");
  };
  // A guarded node (a branch of a run-time If) runs when its guards hold; otherwise its outputs are
  // zeros, which only the If's merge reads, and does not pick.
  auto guards_hold = [&](const Node& n) {
    for (const Guard& guard : n.guards)
      if ((lookup(guard.cond)->get_double(0) != 0) != guard.when) return false;
    return true;
  };
  for (const Node& n : g.nodes) {
    bool all_constant = true;
    for (const auto& o : n.outputs)
      if (!o.empty() && !g.value(o).constant) all_constant = false;
    if (all_constant) continue;
    if (!guards_hold(n)) {
      for (const auto& o : n.outputs)
        if (!o.empty() && !g.value(o).constant) env[o] = Tensor(g.value(o).dtype, g.value(o).shape);
      continue;
    }
    std::vector<const Tensor*> ins;
    for (const auto& in : n.inputs) ins.push_back(in.empty() ? nullptr : lookup(in));
    const OpDef* op = find_op(n.domain, n.op_type);
    if (!op) throw Unsupported(g.source + ": " + n.label() + ": op is not supported");
    EvalContext ec(n, std::move(ins));
    try {
      op->eval(ec);
    } catch (const Unsupported& e) {
      throw Unsupported(g.source + ": " + e.what());
    } catch (const Error& e) {
      throw Error(g.source + ": " + e.what());
    }
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.outputs[i].empty()) continue;
      if (i >= ec.outputs().size() || ec.outputs()[i].dtype() == DType::Undefined)
        throw Error(g.source + ": " + n.label() + ": reference kernel produced no output " + std::to_string(i));
      const Value& v = g.value(n.outputs[i]);
      Tensor& t = ec.outputs()[i];
      if (t.dtype() != v.dtype || t.shape() != v.shape)
        throw Error(g.source + ": " + n.label() + ": shape inference says output " + std::to_string(i) + " is " + dtype_name(v.dtype) +
                    " " + shape_str(v.shape) + " but the kernel produced " + dtype_name(t.dtype()) + " " +
                    shape_str(t.shape()));
      env[n.outputs[i]] = std::move(t);
    }
  }
  std::vector<Tensor> outs;
  for (const std::string& o : g.outputs) outs.push_back(*lookup(o));
  return outs;
}

}  // namespace kiln
