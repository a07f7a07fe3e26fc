#include "toolchain/inspect.h"

#include "frontend/ir/error.h"

#include <fmt/format.h>

#include <set>

#include "frontend/onnx/onnx_import.h"
#include "frontend/ops/op_registry.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/passes/remove_dead_nodes.h"
#include "toolchain/task_table.h"

namespace kiln {
namespace {

std::string human(double v) {
  const char* units[] = {"", "K", "M", "G", "T"};
  int u = 0;
  while (v >= 1000 && u < 4) { v /= 1000; ++u; }
  return u == 0 ? fmt::format("{:.0f}", v) : fmt::format("{:.2f} {}", v, units[u]);
}

}  // namespace

ModelSummary summarize_model(const std::string& path, ShapeBindings bindings, bool tasks) {
  Graph g = import_onnx_file(path);
  ModelSummary s;
  s.file = path;
  s.ir_version = g.ir_version;
  s.opset = g.opsets.count("") ? g.opsets.at("") : 0;  // 0: the model imports only other domains
  s.imported_nodes = static_cast<int64_t>(g.nodes.size());
  for (const Node& n : g.nodes) s.op_histogram[(n.domain.empty() ? "" : n.domain + ".") + n.op_type]++;
  for (const auto& in : g.inputs) {
    if (bindings.input_shapes.count(in) || !g.declared_input_dims.count(in)) continue;  // a sequence or optional: --sequence
    for (const Dim& d : g.declared_input_dims.at(in)) {
      if (d.known()) continue;
      std::string key = d.param.empty() ? "?" : d.param;
      if (d.param.empty()) {
        Shape shape;
        for (const Dim& e : g.declared_input_dims.at(in)) shape.push_back(e.known() ? e.value : 1);
        bindings.input_shapes[in] = shape;
        s.defaulted_dims.push_back(in + ":?");
        break;
      }
      if (!bindings.dims.count(d.param)) {
        bindings.dims[d.param] = 1;
        s.defaulted_dims.push_back(d.param);
      }
    }
  }
  std::map<std::string, std::string> declared;
  for (const auto& in : g.inputs)
    declared[in] = g.composite_inputs.count(in) ? composite_type_str(g.composite_inputs.at(in)) : dims_str(g.declared_input_dims.at(in));
  bind_input_shapes(g, bindings);
  for (const auto& [name, parts] : g.io_parts)  // a sequence's tensors: declared as the sequence is
    if (declared.count(name))
      for (const std::string& part : parts) declared[part] = "part of " + declared.at(name);
  try {
    infer_shapes(g);
  } catch (const Unsupported&) {
    throw;
  } catch (const Error& e) {
    if (s.defaulted_dims.empty()) throw;
    // The error may come from the 1 inspect chose, not from the model: say so, and how to choose.
    std::string dims;
    for (const auto& d : s.defaulted_dims) dims += (dims.empty() ? "" : ", ") + d;
    throw Error(std::string(e.what()) + " (inspect bound the symbolic dims " + dims +
                " to 1; bind them with --dim NAME=N or --input-shape INPUT=AxBx...)");
  }
  remove_dead_nodes(g);
  s.runtime_nodes = static_cast<int64_t>(g.nodes.size());
  // Parameters are the constants the remaining nodes read: initializers, and weights a model builds
  // at load time (ConstantOfShape fills, folded casts), but not dead initializers or shape plumbing
  // that folding consumed.
  // A constant is counted once however many values hold it: an unrolled Loop's iterations read the
  // body's weights under names of their own.
  std::set<const Tensor*> counted;
  auto count = [&](const std::string& name) {
    const Value& v = g.value(name);
    if (!v.constant || !counted.insert(v.constant.get()).second) return;
    s.parameters += v.constant->size();
    s.parameter_bytes += static_cast<int64_t>(v.constant->byte_size());
  };
  for (const Node& n : g.nodes)
    for (const auto& in : n.inputs)
      if (!in.empty()) count(in);
  for (const auto& out : g.outputs) count(out);
  for (const auto& in : g.inputs) {
    const Value& v = g.value(in);
    s.inputs.push_back({in, v.dtype, declared[in], v.shape});
  }
  for (const auto& out : g.outputs) {
    const Value& v = g.value(out);
    s.outputs.push_back({out, v.dtype, shape_str(v.shape), v.shape});
  }
  std::string table;
  for (const Node& n : g.nodes) {
    double f = node_flops(n, g);
    s.flops += f;
    for (const auto& o : n.outputs) {
      if (o.empty()) continue;
      const Value& v = g.value(o);
      table += fmt::format("  {:<32} {:<20} {:<24} {:<8} {}\n", n.name, n.op_type, o, dtype_name(v.dtype),
                           shape_str(v.shape) + (f > 0 ? "  flops " + human(f) : ""));
      f = 0;
    }
  }
  s.node_table = table;
  if (tasks) {
    SubgraphDAG dag = partition_graph(g);
    s.task_table = format_task_table(dag, extract_tasks(g, dag), s.flops);
  }
  return s;
}

std::string format_summary(const ModelSummary& s, bool verbose) {
  std::string out = fmt::format("model    {}\nir       {}   opset {}\n", s.file, s.ir_version, s.opset);
  for (const auto& io : s.inputs)
    out += fmt::format("input    {:<24} {:<8} {}{}\n", io.name, dtype_name(io.dtype), shape_str(io.shape),
                       io.declared != shape_str(io.shape) ? "  (declared " + io.declared + ")" : "");
  for (const auto& io : s.outputs) out += fmt::format("output   {:<24} {:<8} {}\n", io.name, dtype_name(io.dtype), shape_str(io.shape));
  if (!s.defaulted_dims.empty()) {
    out += "note     symbolic dims bound to 1 (use --dim/--input-shape):";
    for (const auto& d : s.defaulted_dims) out += " " + d;
    out += "\n";
  }
  out += fmt::format("params   {} ({} bytes)\n", s.parameters, s.parameter_bytes);
  out += fmt::format("flops    {} ({:.0f})\n", human(s.flops), s.flops);
  out += fmt::format("nodes    {} imported, {} after folding\n", s.imported_nodes, s.runtime_nodes);
  out += "ops     ";
  for (const auto& [op, count] : s.op_histogram) out += fmt::format(" {}:{}", op, count);
  out += "\n";
  if (verbose) out += "nodes (after folding):\n" + s.node_table;
  out += s.task_table;
  return out;
}

}  // namespace kiln
