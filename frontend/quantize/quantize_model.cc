#include "frontend/quantize/quantize_model.h"

#include <fmt/format.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <fstream>
#include <set>

#include "frontend/ir/error.h"
#include "frontend/onnx/onnx_import.h"
#include "frontend/onnx/tensor_proto.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/quantize/calibrate.h"
#include "frontend/quantize/float_rewrites.h"
#include "frontend/quantize/proto_graph.h"
#include "frontend/quantize/qdq_plan.h"
#include "frontend/quantize/quant_params.h"

namespace kiln {
namespace {

// QuantizeLinear's axis and per-channel DequantizeLinear of weights need opset 13.
constexpr int64_t kQdqOpset = 13;

onnx::ModelProto read_model(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path + ": cannot open");
  onnx::ModelProto m;
  if (!m.ParseFromIstream(&f)) throw Error(path + ": not an ONNX model (the protobuf does not parse)");
  return m;
}

int64_t default_opset(const onnx::ModelProto& m) {
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 1;
}

std::string serialize(const onnx::ModelProto& m) {
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

Graph inferred_graph(const std::string& bytes, const std::string& source, const ShapeBindings& bindings) {
  Graph g = import_onnx_bytes(bytes, source);
  bind_input_shapes(g, bindings);
  infer_shapes(g);
  return g;
}

// ONNX shape inference with its data propagation (shapes computed by Shape -> Gather -> Concat ->
// Reshape chains, as exporters of transformers write them).
void infer_onnx_shapes(onnx::ModelProto& m) {
  onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), onnx::ShapeInferenceOptions(false, 0, true));
}

// Gives the graph inputs the shapes the calibration binds (`--input-shape`, `--dim`, the samples'), so
// that ONNX shape inference reaches every value (the converter's Softmax adapter needs its input's
// rank); returns the input types as declared, which the written model keeps.
std::map<std::string, onnx::TypeProto> bind_declared_inputs(onnx::ModelProto& m, const ShapeBindings& b) {
  std::map<std::string, onnx::TypeProto> declared;
  for (auto& in : *m.mutable_graph()->mutable_input()) {
    if (!in.type().has_tensor_type() || !in.type().tensor_type().has_shape()) continue;
    declared[in.name()] = in.type();
    auto* shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
    auto bound = b.input_shapes.find(in.name());
    if (bound != b.input_shapes.end() && static_cast<int>(bound->second.size()) == shape->dim_size()) {
      for (int d = 0; d < shape->dim_size(); ++d) shape->mutable_dim(d)->set_dim_value(bound->second[static_cast<size_t>(d)]);
      continue;
    }
    for (auto& dim : *shape->mutable_dim())
      if (auto named = b.dims.find(dim.dim_param()); dim.has_dim_param() && named != b.dims.end()) dim.set_dim_value(named->second);
  }
  return declared;
}

// Records the dtype and shape kiln's own inference gives every node output ONNX's left without one
// (shapes computed at run time by Shape -> ... -> Reshape chains that it does not follow), for the
// version converter's adapters that need ranks. Nothing when kiln cannot infer the model either.
void annotate_from_kiln(onnx::ModelProto& m, const std::string& path, const ShapeBindings& bindings) {
  Graph g;
  try {
    g = inferred_graph(serialize(m), path, bindings);
  } catch (const std::exception&) {
    return;
  }
  std::set<std::string> known, read;
  for (const auto& v : m.graph().value_info()) known.insert(v.name());
  // Only values something reads: an unread output may change type with the opset (Dropout's mask,
  // its input's type before opset 10, bool after), which the converter then finds in conflict.
  for (const auto& n : m.graph().node())
    for (const std::string& in : n.input()) read.insert(in);
  for (const auto& out : m.graph().output()) read.insert(out.name());
  for (const auto& n : m.graph().node())
    for (const std::string& out : n.output()) {
      if (out.empty() || known.count(out) || !read.count(out) || !g.has_value(out)) continue;
      const Value& v = g.value(out);
      if (!v.typed || v.kind != ValueKind::Tensor) continue;
      auto* info = m.mutable_graph()->add_value_info();
      info->set_name(out);
      auto* type = info->mutable_type()->mutable_tensor_type();
      type->set_elem_type(static_cast<int32_t>(v.dtype));
      for (int64_t d : v.shape) type->mutable_shape()->add_dim()->set_dim_value(d);
      known.insert(out);
    }
}

// Shape inference (the rewrites read ranks) and, for an older model, ONNX's version converter.
onnx::ModelProto to_qdq_opset(const std::string& path, onnx::ModelProto m, const ShapeBindings& bindings,
                              std::vector<std::string>& log) {
  const int64_t opset = default_opset(m);
  const std::map<std::string, onnx::TypeProto> declared = bind_declared_inputs(m, bindings);
  auto restore_inputs = [&](onnx::ModelProto& model) {
    for (auto& in : *model.mutable_graph()->mutable_input())
      if (auto d = declared.find(in.name()); d != declared.end()) *in.mutable_type() = d->second;
  };
  try {
    infer_onnx_shapes(m);
  } catch (const std::exception&) {
    // ONNX's inference rejects some older models kiln reads (a Dropout's mask type in inception_v1):
    // kiln's own inference below gives the converter its ranks, and the MatMul rewrite does without.
  }
  if (opset >= kQdqOpset) {
    restore_inputs(m);
    return m;
  }
  annotate_from_kiln(m, path, bindings);
  try {
    m = onnx::version_conversion::ConvertVersion(m, static_cast<int>(kQdqOpset));
    // Opset 13 needs IR version 7. Before IR 4 every initializer was also listed as a graph input, which
    // from IR 4 on would make it a default the caller may override: those listings go.
    if (m.ir_version() < 4) {
      std::set<std::string> initializers;
      for (const auto& t : m.graph().initializer()) initializers.insert(t.name());
      auto* inputs = m.mutable_graph()->mutable_input();
      for (int i = inputs->size() - 1; i >= 0; --i)
        if (initializers.count(inputs->Get(i).name())) inputs->DeleteSubrange(i, 1);
    }
    if (m.ir_version() < 7) m.set_ir_version(7);
    infer_onnx_shapes(m);  // the converter keeps no value_info
    restore_inputs(m);
    log.push_back(fmt::format("opset: {} -> {} (ONNX's version converter)", opset, kQdqOpset));
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: cannot bring opset {} to {} for quantization: {}", path, opset, kQdqOpset, e.what()));
  }
  return m;
}

onnx::NodeProto make_node(const std::string& op, const std::vector<std::string>& in, const std::string& out,
                          const std::string& name) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.set_name(name);
  for (const std::string& i : in) n.add_input(i);
  n.add_output(out);
  return n;
}

void set_axis(onnx::NodeProto& n, int64_t axis) {
  auto* a = n.add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(axis);
}

// Writes the plan into the model: the nodes' int8 weights and int32 biases behind DequantizeLinear,
// and a QuantizeLinear -> DequantizeLinear pair on each planned activation.
class QdqWriter {
 public:
  /// `inferred`: the float model, shape-inferred; with `expose_codes`, the codes' shapes come from it.
  QdqWriter(onnx::GraphProto& g, const QdqPlan& plan, const std::map<std::string, QuantParams>& params, bool reduce_range,
            const Graph* inferred)
      : g_(g), plan_(plan), params_(params), reduce_range_(reduce_range), inferred_(inferred), names_(g) {}

  void write() {
    for (const QuantizedNode& q : plan_.nodes) quantize_node(q);
    std::set<std::string> graph_inputs;
    for (const auto& v : g_.input()) graph_inputs.insert(v.name());
    // Node order: weight dequantizations first (they read only initializers), then the graph inputs'
    // pairs, then each node followed by the pairs of its outputs.
    std::vector<onnx::NodeProto> nodes = std::move(front_);
    std::set<std::string> planned(plan_.activations.begin(), plan_.activations.end());
    for (const std::string& v : plan_.activations)
      if (graph_inputs.count(v)) append_input_pair(v, nodes);
    for (const auto& n : g_.node()) {
      onnx::NodeProto copy = n;
      for (auto& in : *copy.mutable_input())
        if (auto r = input_renames_.find(in); r != input_renames_.end()) in = r->second;
      std::vector<std::pair<std::string, std::string>> pairs;  // (planned value, the node's float output)
      for (auto& out : *copy.mutable_output())
        if (planned.count(out)) {
          pairs.emplace_back(out, names_.fresh(out + ".f32"));
          out = pairs.back().second;
        }
      nodes.push_back(std::move(copy));
      for (const auto& [v, f32] : pairs) append_pair(v, f32, v, nodes);
    }
    g_.clear_node();
    for (auto& n : nodes) *g_.add_node() = std::move(n);
    drop_unread_initializers(g_);
    g_.clear_value_info();  // renamed and absorbed values: kiln and ONNX Runtime infer them again
  }

 private:
  int node_index(const std::string& output) const {
    for (int i = 0; i < g_.node_size(); ++i)
      if (g_.node(i).output_size() > 0 && g_.node(i).output(0) == output) return i;
    throw Error("kiln quantize: no node writes '" + output + "'");
  }

  const QuantParams& params(const std::string& activation) const { return params_.at(plan_.params_from.at(activation)); }

  // The scale and zero point initializers of a parameter root, made once and shared by its values.
  std::pair<std::string, std::string> param_names(const std::string& activation) {
    const std::string& root = plan_.params_from.at(activation);
    auto it = param_names_.find(root);
    if (it != param_names_.end()) return it->second;
    const QuantParams& p = params_.at(root);
    const std::string s = names_.fresh(root + ".scale"), z = names_.fresh(root + ".zero_point");
    set_initializer(g_, s, Tensor::scalar_double(DType::Float32, p.scale));
    set_initializer(g_, z, Tensor::scalar_int(p.dtype, p.zero_point));
    return param_names_[root] = {s, z};
  }

  void quantize_node(const QuantizedNode& q) {
    if (!q.absorbed.empty()) {
      // The node writes the ReLU's output, whose range (from 0) its quantization takes; the ReLU goes.
      const int relu = node_index(q.absorbed);
      g_.mutable_node(node_index(q.output))->set_output(0, q.absorbed);
      remove_node(g_, relu);
    }
    onnx::NodeProto& n = *g_.mutable_node(node_index(q.absorbed.empty() ? q.output : q.absorbed));
    const std::string label = n.name().empty() ? n.output(0) : n.name();
    const Tensor w = *float_initializer(g_, n.input(1));
    const QuantizedWeight qw = quantize_weight(w, q.per_channel ? q.channel_axis : -1, reduce_range_);
    n.set_input(1, dequantized_constant(n.input(1), qw.values, qw.scales, qw.zero_points, q.channel_axis, label));
    if (n.input_size() > 2 && !n.input(2).empty()) {
      const int64_t channels = w.shape()[static_cast<size_t>(q.channel_axis)];
      const QuantizedBias qb = quantize_bias(*float_initializer(g_, n.input(2)), params(n.input(0)).scale, qw.scales, channels);
      n.set_input(2, dequantized_constant(n.input(2), qb.values, qb.scales, Tensor(DType::Int32, {channels}), 0, label));
    }
  }

  // `codes` as an initializer and a DequantizeLinear of it; returns what the DequantizeLinear writes.
  std::string dequantized_constant(const std::string& name, const Tensor& codes, const Tensor& scales, const Tensor& zeros,
                                   int64_t axis, const std::string& label) {
    const std::string c = names_.fresh(name + ".q"), s = names_.fresh(name + ".scale"), z = names_.fresh(name + ".zero_point");
    set_initializer(g_, c, codes);
    set_initializer(g_, s, scales);
    set_initializer(g_, z, zeros);
    const std::string out = names_.fresh(name + ".dequantized");
    onnx::NodeProto dq = make_node("DequantizeLinear", {c, s, z}, out, names_.fresh(label + ".dequantize." + name));
    if (scales.rank() == 1) set_axis(dq, axis);
    front_.push_back(std::move(dq));
    return out;
  }

  // `from` (float) -> QuantizeLinear -> DequantizeLinear -> `to`.
  void append_pair(const std::string& v, const std::string& from, const std::string& to, std::vector<onnx::NodeProto>& nodes) {
    const auto [s, z] = param_names(v);
    const std::string codes = names_.fresh(v + ".q");
    nodes.push_back(make_node("QuantizeLinear", {from, s, z}, codes, names_.fresh(v + ".quantize")));
    if (inferred_) {
      auto* out = g_.add_output();
      out->set_name(codes);
      auto* type = out->mutable_type()->mutable_tensor_type();
      type->set_elem_type(params(v).dtype == DType::Int8 ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8);
      auto* shape = type->mutable_shape();
      for (int64_t d : inferred_->value(v).shape) shape->add_dim()->set_dim_value(d);
    }
    nodes.push_back(make_node("DequantizeLinear", {codes, s, z}, to, names_.fresh(v + ".dequantize")));
  }

  // A graph input keeps its name: its readers read the pair's output instead.
  void append_input_pair(const std::string& v, std::vector<onnx::NodeProto>& nodes) {
    const std::string to = names_.fresh(v + ".dequantized");
    append_pair(v, v, to, nodes);
    input_renames_[v] = to;
  }

  onnx::GraphProto& g_;
  const QdqPlan& plan_;
  const std::map<std::string, QuantParams>& params_;
  bool reduce_range_;
  const Graph* inferred_;
  NameSet names_;
  std::vector<onnx::NodeProto> front_;
  std::map<std::string, std::pair<std::string, std::string>> param_names_;
  std::map<std::string, std::string> input_renames_;
};

}  // namespace

QuantizeResult quantize_model(const std::string& path, const QuantizeOptions& o,
                              const std::vector<std::map<std::string, Tensor>>& samples) {
  QuantizeResult r;
  onnx::ModelProto m = to_qdq_opset(path, read_model(path), o.bindings, r.log);
  for (std::string& line : materialize_weights(*m.mutable_graph(), inferred_graph(serialize(m), path, o.bindings)))
    r.log.push_back(std::move(line));
  for (auto* rewrite : {conv_bn_to_conv, conv_add_to_bias, matmul_add_to_gemm, relu_before_max_pool})
    for (std::string& line : rewrite(*m.mutable_graph())) r.log.push_back(std::move(line));

  const Graph model = import_onnx_bytes(serialize(m), path);
  const QdqPlan plan = plan_qdq(model, o.per_channel);
  if (plan.nodes.empty()) throw Error(path + ": nothing to quantize (no Conv, Gemm or MatMul by a constant weight)");

  const Graph inferred = inferred_graph(serialize(m), path, o.bindings);
  std::vector<std::string> roots;
  for (const std::string& v : plan.activations)
    if (plan.params_from.at(v) == v) roots.push_back(v);
  std::map<std::string, QuantParams> params;
  for (const auto& [name, range] : calibrate(inferred, roots, samples))
    params[name] = activation_params(range.lo, range.hi, o.activations, o.reduce_range);

  QdqWriter(*m.mutable_graph(), plan, params, o.reduce_range, o.expose_codes ? &inferred : nullptr).write();
  auto* note = m.add_metadata_props();
  note->set_key("kiln.quantize");
  note->set_value(fmt::format("{} activations (min-max over {} samples{}), int8 weights per {}", dtype_name(o.activations),
                              samples.size(), o.reduce_range ? ", 7-bit codes" : "", o.per_channel ? "channel" : "tensor"));
  r.model = serialize(m);
  // What kiln writes it must read: the written model imports and infers as any other would.
  inferred_graph(r.model, path + " (quantized)", o.bindings);
  r.log.push_back(fmt::format("quantized {} nodes and {} activations ({} calibrated ranges)", plan.nodes.size(),
                              plan.activations.size(), roots.size()));
  return r;
}

}  // namespace kiln
