#include "scheduler/tasks/lower_subgraph.h"

#include <map>

#include "scheduler/te/lower_graph.h"
#include "scheduler/te/narrow_codes.h"

namespace kiln {

LoweredSubgraph lower_subgraph(const Graph& g, const Subgraph& sg) {
  LoweredSubgraph ls;
  std::map<std::string, te::TensorRef> env;
  for (const std::string& in : sg.inputs) {
    const Value& v = g.value(in);
    const te::StoredInput s = te::stored_input(in, v.dtype, v.shape, v.constant);
    env[in] = s.codes;
    ls.inputs.emplace_back(in, s.placeholder);
  }
  auto tensor_of = [&](const std::string& name) { return env.at(name); };
  for (int gi : sg.nodes) te::lower_node(g, g.nodes[gi], tensor_of, env);
  for (const std::string& o : sg.outputs) ls.outputs.push_back(te::stored_output(o, env.at(o), g.value(o).dtype));
  ls.dag = te::make_dag(ls.outputs);
  return ls;
}

}  // namespace kiln
