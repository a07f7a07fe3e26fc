#include "toolchain/pipeline.h"

#include <algorithm>
#include <sstream>

#include "frontend/onnx/onnx_import.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/passes/remove_dead_nodes.h"

namespace kiln {

const std::vector<std::string>& frontend_steps() {
  static const std::vector<std::string> steps = {"import", "bind", "infer", "prune"};
  return steps;
}

namespace {
bool wants_dump(const PipelineOptions& o, const std::string& step) {
  return std::find(o.dump_after.begin(), o.dump_after.end(), step) != o.dump_after.end() ||
         std::find(o.dump_after.begin(), o.dump_after.end(), "all") != o.dump_after.end();
}

void maybe_dump(const PipelineOptions& o, const std::string& step, const Graph& g) {
  if (wants_dump(o, step) && o.on_dump) o.on_dump(step, g);
}
}  // namespace

Graph load_model(const std::string& path, const PipelineOptions& opts) {
  Graph g = import_onnx_file(path);
  maybe_dump(opts, "import", g);
  bind_input_shapes(g, opts.bindings);
  maybe_dump(opts, "bind", g);
  infer_shapes(g);
  maybe_dump(opts, "infer", g);
  remove_dead_nodes(g);
  maybe_dump(opts, "prune", g);
  return g;
}

SubgraphDAG partition_model(const Graph& g, const PipelineOptions& opts) {
  SubgraphDAG dag = partition_graph(g);
  if (wants_dump(opts, "partition") && opts.on_dump_text) opts.on_dump_text("partition", print_subgraph_dag(g, dag));
  return dag;
}

std::string print_graph(const Graph& g) {
  std::ostringstream os;
  auto type_of = [&](const std::string& name) {
    const Value& v = g.value(name);
    if (!v.typed) return std::string("?");
    return dtype_name(v.dtype) + "[" + shape_str(v.shape) + "]" + (v.constant ? " const" : "");
  };
  os << "graph " << g.name << "\n";
  for (const auto& in : g.inputs) os << "  input  " << in << ": " << type_of(in) << "\n";
  for (const Node& n : g.nodes) {
    os << "  ";
    for (size_t i = 0; i < n.outputs.size(); ++i) os << (i ? ", " : "") << (n.outputs[i].empty() ? "_" : n.outputs[i]);
    os << " = " << n.op_type << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << (n.inputs[i].empty() ? "_" : n.inputs[i]);
    os << ")  # " << n.name;
    for (const auto& o : n.outputs)
      if (!o.empty()) os << " " << type_of(o);
    os << "\n";
  }
  for (const auto& out : g.outputs) os << "  output " << out << ": " << type_of(out) << "\n";
  return os.str();
}

}  // namespace kiln
