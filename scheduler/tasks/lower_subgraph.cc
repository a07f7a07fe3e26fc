#include "scheduler/tasks/lower_subgraph.h"

#include <map>

#include "scheduler/te/op_lowering.h"

namespace kiln {

namespace {

te::LowerContext context_for(const Graph& g, const Node& n, const std::map<std::string, te::TensorRef>& env) {
  std::vector<te::TensorRef> ins;
  std::vector<const Tensor*> consts;
  for (const auto& in : n.inputs) {
    ins.push_back(in.empty() ? nullptr : env.at(in));
    consts.push_back(in.empty() ? nullptr : g.value(in).constant.get());
  }
  std::vector<DType> out_dtypes;
  std::vector<Shape> out_shapes;
  for (const auto& o : n.outputs) {
    out_dtypes.push_back(o.empty() ? DType::Undefined : g.value(o).dtype);
    out_shapes.push_back(o.empty() ? Shape{} : g.value(o).shape);
  }
  return te::LowerContext(n, std::move(ins), std::move(consts), std::move(out_dtypes), std::move(out_shapes));
}

}  // namespace

LoweredSubgraph lower_subgraph(const Graph& g, const Subgraph& sg) {
  LoweredSubgraph ls;
  std::map<std::string, te::TensorRef> env;
  for (const std::string& in : sg.inputs) {
    const Value& v = g.value(in);
    te::TensorRef p = te::placeholder(in, v.dtype, v.shape, v.constant);
    env[in] = p;
    ls.inputs.emplace_back(in, p);
  }
  for (int gi : sg.nodes) {
    const Node& n = g.nodes[gi];
    const te::OpLowering* l = te::find_lowering(n.domain, n.op_type);
    if (!l) throw Unsupported(g.source + ": " + n.label() + ": no tensor-expression lowering yet");
    te::LowerContext ctx = context_for(g, n, env);
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
  for (const std::string& o : sg.outputs) ls.outputs.push_back(env.at(o));
  ls.dag = te::make_dag(ls.outputs);
  return ls;
}

}  // namespace kiln
