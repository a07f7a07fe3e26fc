#include "frontend/onnx/onnx_import.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "frontend/ir/error.h"
#include "frontend/onnx/tensor_proto.h"
#include "frontend/ops/op_registry.h"

namespace kiln {
namespace {

using SubgraphImporter = std::function<std::shared_ptr<const Graph>(const onnx::GraphProto&, const std::string& where)>;

// Attributes carry their kind in `type`; old exporters leave it unset, so fall back to the filled field.
AttrValue convert_attribute(const onnx::AttributeProto& a, const std::string& where, const SubgraphImporter& subgraph) {
  using A = onnx::AttributeProto;
  A::AttributeType type = a.type();
  if (type == A::UNDEFINED) {
    if (a.has_f()) type = A::FLOAT;
    else if (a.has_i()) type = A::INT;
    else if (a.has_s()) type = A::STRING;
    else if (a.has_t()) type = A::TENSOR;
    else if (a.has_g()) type = A::GRAPH;
    else if (a.floats_size()) type = A::FLOATS;
    else if (a.ints_size()) type = A::INTS;
    else if (a.strings_size()) type = A::STRINGS;
    else throw Error(where + ": attribute '" + a.name() + "' has no type and no value");
  }
  switch (type) {
    case A::FLOAT: return static_cast<double>(a.f());
    case A::INT: return static_cast<int64_t>(a.i());
    case A::STRING: return a.s();
    case A::TENSOR: return tensor_from_proto(a.t(), where + ": attribute '" + a.name() + "'");
    case A::FLOATS: return std::vector<double>(a.floats().begin(), a.floats().end());
    case A::INTS: return std::vector<int64_t>(a.ints().begin(), a.ints().end());
    case A::STRINGS: return std::vector<std::string>(a.strings().begin(), a.strings().end());
    case A::GRAPH: return SubgraphAttr{subgraph(a.g(), where + ": attribute '" + a.name() + "'")};
    case A::GRAPHS: return SubgraphAttr{};
    case A::SPARSE_TENSOR:
    case A::SPARSE_TENSORS: throw Unsupported(where + ": sparse tensor attribute '" + a.name() + "' is not supported");
    case A::TENSORS: throw Unsupported(where + ": tensor-list attribute '" + a.name() + "' is not supported");
    // Optional's `type`: what an empty optional would hold. kiln resolves optionals at compile time,
    // where only whether one holds a value matters (resolve_sequences.h); the type is kept as text.
    case A::TYPE_PROTO: return a.tp().DebugString();
    case A::TYPE_PROTOS: throw Unsupported(where + ": type-list attribute '" + a.name() + "' is not supported");
    default: throw Error(where + ": attribute '" + a.name() + "' has unknown type " + std::to_string(type));
  }
}

// Dims of a declared tensor shape; throws Error for a negative one.
std::vector<Dim> declared_dims(const onnx::TensorShapeProto& shape, const std::string& where) {
  std::vector<Dim> dims;
  for (const auto& d : shape.dim()) {
    Dim dim;
    if (d.has_dim_value()) {
      if (d.dim_value() < 0) throw Error(where + ": negative dimension " + std::to_string(d.dim_value()));
      dim.value = d.dim_value();
    } else if (d.has_dim_param()) {
      dim.param = d.dim_param();
    }
    dims.push_back(dim);
  }
  return dims;
}

// A sequence, optional or optional sequence of tensors, as `t` declares it; Unsupported for maps and
// deeper nesting.
CompositeType composite_type(const onnx::TypeProto& type, const std::string& where) {
  CompositeType c;
  const onnx::TypeProto* t = &type;
  while (t->has_sequence_type() || t->has_optional_type()) {
    c.kinds.push_back(t->has_sequence_type() ? ValueKind::Sequence : ValueKind::Optional);
    if (c.kinds.size() > 2 || (c.kinds.size() == 2 && c.kinds != std::vector{ValueKind::Optional, ValueKind::Sequence}))
      throw Unsupported(where + ": only sequences, optionals and optional sequences of tensors are supported");
    t = t->has_sequence_type() ? &t->sequence_type().elem_type() : &t->optional_type().elem_type();
  }
  if (!t->has_tensor_type()) throw Unsupported(where + ": only sequences and optionals of tensors are supported (not maps)");
  c.dtype = dtype_from_int(t->tensor_type().elem_type());
  if (!is_supported(c.dtype)) throw Unsupported(where + ": dtype " + dtype_name(c.dtype) + " is not supported");
  c.ranked = t->tensor_type().has_shape();
  if (c.ranked) c.dims = declared_dims(t->tensor_type().shape(), where);
  return c;
}

// A graph input's declared type: a dense tensor of a supported dtype, or a sequence or optional of them.
void import_input_type(const onnx::ValueInfoProto& vi, const std::string& file, Graph& g) {
  const std::string where = file + ": graph input '" + vi.name() + "'";
  if (!vi.has_type() || vi.type().value_case() == onnx::TypeProto::VALUE_NOT_SET) throw Error(where + ": has no type");
  Value v;
  v.name = vi.name();
  if (!vi.type().has_tensor_type()) {
    CompositeType c = composite_type(vi.type(), where);
    v.dtype = c.dtype;
    v.kind = c.kinds.front();
    g.composite_inputs[vi.name()] = std::move(c);
  } else {
    const auto& tt = vi.type().tensor_type();
    v.dtype = dtype_from_int(tt.elem_type());
    if (!is_supported(v.dtype)) throw Unsupported(where + ": dtype " + dtype_name(v.dtype) + " is not supported");
    if (!tt.has_shape()) throw Unsupported(where + ": has no shape (unknown rank is not supported)");
    g.declared_input_dims[vi.name()] = declared_dims(tt.shape(), where);
  }
  g.values[vi.name()] = v;
  g.inputs.push_back(vi.name());
}

// ONNX requires topological order but producers do not always honour it; sort, and tell a cycle apart
// from an input that nothing produces.
std::vector<size_t> topo_order(const std::vector<Node>& nodes, const Graph& g) {
  std::set<std::string> available;
  for (const auto& [name, v] : g.values) available.insert(name);
  std::set<std::string> produced_somewhere = available;
  for (const Node& n : nodes)
    for (const auto& o : n.outputs)
      if (!o.empty()) produced_somewhere.insert(o);
  // A node's inputs, and the values its subgraphs read from this graph (an If's branches).
  std::vector<std::vector<std::string>> reads(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    reads[i] = nodes[i].inputs;
    for (const std::string& name : implicit_inputs(nodes[i])) reads[i].push_back(name);
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const auto& in : reads[i])
      if (!in.empty() && !produced_somewhere.count(in))
        throw Error(g.source + ": " + nodes[i].label() + ": input '" + in + "' is not produced by any node, initializer or graph input");

  std::vector<size_t> sorted;
  std::vector<bool> done(nodes.size(), false);
  bool progress = true;
  while (sorted.size() < nodes.size() && progress) {
    progress = false;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (done[i]) continue;
      bool ready = true;
      for (const auto& in : reads[i])
        if (!in.empty() && !available.count(in)) { ready = false; break; }
      if (!ready) continue;
      for (const auto& o : nodes[i].outputs)
        if (!o.empty()) available.insert(o);
      done[i] = true;
      sorted.push_back(i);
      progress = true;
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!done[i]) throw Error(g.source + ": graph has a cycle through " + nodes[i].label());
  return sorted;
}

// libonnx 1.12's checker knows IR <= 8 and opsets <= 17: run it only where it applies.
void run_onnx_checker(const onnx::ModelProto& m, const std::string& file, const std::vector<size_t>& order,
                      const std::map<std::pair<size_t, int>, std::string>& renamed_outputs) {
  if (m.ir_version() > 8) return;
  for (const auto& o : m.opset_import())
    if ((o.domain().empty() || o.domain() == "ai.onnx") && o.version() > 17) return;
  // Check the model as kiln reads it: nodes in topological order, duplicate constants renamed.
  bool identity = renamed_outputs.empty();
  for (size_t i = 0; i < order.size(); ++i) identity &= order[i] == i;
  onnx::ModelProto normalized;
  if (!identity) {
    normalized = m;
    auto* nodes = normalized.mutable_graph()->mutable_node();
    nodes->Clear();
    for (size_t i : order) {
      auto* n = nodes->Add();
      *n = m.graph().node(static_cast<int>(i));
      for (const auto& [where, name] : renamed_outputs)
        if (where.first == i) n->set_output(where.second, name);
    }
  }
  try {
    onnx::checker::check_model(identity ? m : normalized);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    for (char& c : msg)
      if (c == '\n') c = ' ';
    throw Error(file + ": ONNX checker: " + msg);
  }
}

// Initializers as constant values of `g`.
void import_initializers(const onnx::GraphProto& gp, const std::string& file, Graph& g) {
  for (const auto& init : gp.initializer()) {
    const std::string where = file + ": initializer '" + init.name() + "'";
    if (init.name().empty()) throw Error(file + ": an initializer has no name");
    Value v;
    v.name = init.name();
    Tensor t = tensor_from_proto(init, where);
    v.dtype = t.dtype();
    v.shape = t.shape();
    v.typed = true;
    v.constant = std::make_shared<const Tensor>(std::move(t));
    g.values[v.name] = std::move(v);
  }
}

// Node `i` of a graph whose opsets are `g`'s: its op must be one kiln knows (If is handled by
// inference rather than by an op of its own: is_control_flow), its subgraphs imported too.
Node convert_node(const onnx::NodeProto& np, int i, const Graph& g, const std::string& file, const SubgraphImporter& subgraph) {
  Node n;
  n.op_type = np.op_type();
  n.name = np.name().empty() ? np.op_type() + "_" + std::to_string(i) : np.name();
  n.domain = np.domain() == "ai.onnx" ? "" : np.domain();
  const std::string where = file + ": " + n.label();
  if (n.op_type.empty()) throw Error(file + ": node " + std::to_string(i) + " has no op_type");
  // kiln's own ops (an If's merges, a loop's body, blocked layouts) are made by its passes, which
  // keep their contracts; a model naming them could break those contracts, so none may.
  if (n.domain == "kiln") throw Unsupported(where + ": op kiln." + n.op_type + " is kiln's own, made by its passes, not for models");
  auto ops = g.opsets.find(n.domain);
  if (!find_op(n.domain, n.op_type) && !is_control_flow(n) && !is_sequence_op(n))
    throw Unsupported(where + ": op " + (n.domain.empty() ? "" : n.domain + ".") + n.op_type + " is not supported");
  if (ops == g.opsets.end()) throw Error(where + ": domain '" + n.domain + "' is not imported by the model");
  n.opset = ops->second;
  n.inputs.assign(np.input().begin(), np.input().end());
  n.outputs.assign(np.output().begin(), np.output().end());
  for (const auto& a : np.attribute()) {
    if (a.has_ref_attr_name() && !a.ref_attr_name().empty())
      throw Error(where + ": attribute '" + a.name() + "' refers to a function attribute outside a function");
    n.attrs[a.name()] = convert_attribute(a, where, subgraph);
  }
  return n;
}

// A subgraph (an If branch): its initializers, inputs (by name), outputs and nodes, in the order the
// model gives them (ONNX orders a subgraph's nodes; values from outside it are available throughout).
std::shared_ptr<const Graph> import_subgraph(const onnx::GraphProto& gp, const Graph& outer, const std::string& where,
                                             int depth) {
  // Subgraphs nest through attributes; a bounded depth keeps a hostile file from exhausting the stack.
  constexpr int kMaxSubgraphDepth = 32;
  if (depth > kMaxSubgraphDepth) throw Error(where + ": subgraphs nest more than " + std::to_string(kMaxSubgraphDepth) + " deep");
  auto g = std::make_shared<Graph>();
  g->source = outer.source;
  g->name = gp.name().empty() ? "subgraph" : gp.name();
  g->opsets = outer.opsets;
  g->ir_version = outer.ir_version;
  if (gp.sparse_initializer_size() > 0) throw Unsupported(where + ": sparse initializers are not supported");
  import_initializers(gp, outer.source, *g);
  for (const auto& in : gp.input()) {
    if (in.name().empty()) throw Error(where + ": a subgraph input has no name");
    g->inputs.push_back(in.name());
    g->values[in.name()].name = in.name();
  }
  for (const auto& out : gp.output()) {
    if (out.name().empty()) throw Error(where + ": a subgraph output has no name");
    g->outputs.push_back(out.name());
  }
  const SubgraphImporter nested = [&](const onnx::GraphProto& sub, const std::string& w) {
    return import_subgraph(sub, *g, w, depth + 1);
  };
  std::set<std::string> defined;
  for (int i = 0; i < gp.node_size(); ++i) {
    Node n = convert_node(gp.node(i), i, *g, outer.source, nested);
    for (const std::string& o : n.outputs)
      if (!o.empty() && (g->values.count(o) || !defined.insert(o).second))
        throw Error(outer.source + ": " + n.label() + ": output '" + o + "' is defined more than once in " + where);
    g->nodes.push_back(std::move(n));
  }
  for (const std::string& o : defined) g->values[o].name = o;
  return g;
}

Graph import_model(const onnx::ModelProto& m, const std::string& file, const ImportOptions& opts) {
  Graph g;
  g.source = file;
  g.ir_version = m.ir_version();
  if (!m.has_graph()) throw Error(file + ": model has no graph");
  for (const auto& o : m.opset_import()) {
    std::string d = o.domain() == "ai.onnx" ? "" : o.domain();
    g.opsets[d] = o.version();
  }
  if (!g.opsets.count("") && m.opset_import_size() == 0) g.opsets[""] = 1;  // IR < 3 models import nothing
  // A model of ai.onnx.ml or training-domain ops alone need not import the default domain; its nodes
  // are checked against their own domain's import below.
  const int64_t opset = g.opsets.count("") ? g.opsets[""] : kMinOpset;
  if (opset < kMinOpset || opset > kMaxOpset)
    throw Unsupported(file + ": opset " + std::to_string(opset) + " is not supported (kiln supports " +
                      std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) + ")");
  if (m.functions_size() > 0) throw Unsupported(file + ": model-local functions are not supported");

  const onnx::GraphProto& gp = m.graph();
  g.name = gp.name().empty() ? "main" : gp.name();
  if (gp.sparse_initializer_size() > 0) throw Unsupported(file + ": sparse initializers are not supported");

  import_initializers(gp, file, g);
  for (const auto& in : gp.input()) {
    if (in.name().empty()) throw Error(file + ": a graph input has no name");
    if (g.values.count(in.name())) continue;  // an initializer listed as input (IR < 4): a constant
    import_input_type(in, file, g);
  }
  for (const auto& out : gp.output()) {
    if (out.name().empty()) throw Error(file + ": a graph output has no name");
    g.outputs.push_back(out.name());
  }
  if (g.outputs.empty()) throw Error(file + ": graph has no outputs");

  std::vector<Node> nodes;
  std::set<std::string> outputs_seen;
  std::map<std::pair<size_t, int>, std::string> renamed_outputs;  // (node, output index) -> new name
  const SubgraphImporter subgraph = [&](const onnx::GraphProto& sub, const std::string& where) {
    return import_subgraph(sub, g, where, 1);
  };
  for (int i = 0; i < gp.node_size(); ++i) {
    Node n = convert_node(gp.node(i), i, g, file, subgraph);
    const std::string where = file + ": " + n.label();
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      std::string& o = n.outputs[k];
      if (o.empty()) continue;
      if (!g.values.count(o) && outputs_seen.insert(o).second) continue;
      // Some graph optimisers replace a Constant by appending a new one under the same name; ONNX
      // Runtime takes the last definition, and so does kiln: the earlier Constant is renamed (and
      // becomes dead). Any other redefinition is an error.
      auto earlier = std::find_if(nodes.begin(), nodes.end(), [&](const Node& e) {
        return std::find(e.outputs.begin(), e.outputs.end(), o) != e.outputs.end();
      });
      if (n.op_type != "Constant" || g.values.count(o) || earlier == nodes.end() || earlier->op_type != "Constant")
        throw Error(where + ": output '" + o + "' is defined more than once");
      size_t e = static_cast<size_t>(earlier - nodes.begin());
      std::string fresh = o + "/kiln_replaced_" + std::to_string(e);
      renamed_outputs[{e, 0}] = fresh;
      earlier->outputs[0] = fresh;
      outputs_seen.insert(fresh);
    }
    nodes.push_back(std::move(n));
  }
  std::vector<size_t> order = topo_order(nodes, g);
  for (size_t i : order) g.nodes.push_back(std::move(nodes[i]));
  for (const auto& o : g.outputs)
    if (!g.values.count(o) && !outputs_seen.count(o))
      throw Error(file + ": graph output '" + o + "' is not produced by any node, initializer or graph input");
  for (const Node& n : g.nodes)
    for (const auto& o : n.outputs)
      if (!o.empty()) g.values[o].name = o;
  if (opts.onnx_checker) run_onnx_checker(m, file, order, renamed_outputs);
  return g;
}

}  // namespace

Graph import_onnx_bytes(const std::string& bytes, const std::string& source, const ImportOptions& opts) {
  onnx::ModelProto m;
  if (!m.ParseFromString(bytes)) throw Error(source + ": not a valid ONNX model (protobuf parse failed)");
  return import_model(m, source, opts);
}

Graph import_onnx_file(const std::string& path, const ImportOptions& opts) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  if (ss.str().empty()) throw Error(path + ": file is empty");
  return import_onnx_bytes(ss.str(), path, opts);
}

}  // namespace kiln
