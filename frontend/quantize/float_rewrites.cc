#include "frontend/quantize/float_rewrites.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "frontend/quantize/proto_graph.h"

namespace kiln {
namespace {

bool is_default_domain(const onnx::NodeProto& n) { return n.domain().empty() || n.domain() == "ai.onnx"; }

std::string node_label(const onnx::NodeProto& n) { return n.name().empty() ? n.output(0) : n.name(); }

// The Add that alone reads node i's output, and the float32 constant it adds; nothing otherwise.
struct ConstantAdd {
  int node = -1;
  Tensor constant;
};
std::optional<ConstantAdd> constant_add_after(onnx::GraphProto& g, int i) {
  const std::string& out = g.node(i).output(0);
  auto r = sole_reader(g, out);
  if (!r || *r <= i) return std::nullopt;  // the Add comes after the node (graphs are sorted)
  const onnx::NodeProto& add = g.node(*r);
  if (add.op_type() != "Add" || !is_default_domain(add) || add.input_size() != 2) return std::nullopt;
  const std::string& other = add.input(0) == out ? add.input(1) : add.input(0);
  if (other == out) return std::nullopt;  // x + x
  auto c = float_initializer(g, other);
  if (!c) return std::nullopt;
  return ConstantAdd{*r, *c};
}

// Whether `c` broadcast against a tensor of rank `rank` adds one value per element of axis `axis`
// (extent `extent`), or one value to everything, without growing the result.
bool per_axis_constant(const Tensor& c, int rank, int axis, int64_t extent) {
  if (c.rank() > rank) return false;
  if (c.size() == 1) return true;
  if (c.size() != extent) return false;
  const int at = axis - (rank - static_cast<int>(c.rank()));  // the axis in c's dims, right-aligned
  return at >= 0 && c.shape()[static_cast<size_t>(at)] == extent;
}

// Replaces node i's output by the Add's and removes the Add: its constant is now the node's bias.
void absorb_add(onnx::GraphProto& g, int i, const ConstantAdd& add, const std::string& bias) {
  g.mutable_node(i)->set_output(0, g.node(add.node).output(0));
  remove_node(g, add.node);
  while (g.node(i).input_size() < 3) g.mutable_node(i)->add_input("");
  g.mutable_node(i)->set_input(2, bias);
  drop_unread_initializers(g);
}


// Removes nodes none of whose outputs anything reads (or that initializers now define), until none is left.
void remove_dead_nodes(onnx::GraphProto& g) {
  for (bool removed = true; removed;) {
    removed = false;
    for (int i = g.node_size() - 1; i >= 0; --i) {
      bool dead = true;
      for (const auto& out : g.node(i).output())
        if (!out.empty() && !find_initializer(g, out) && count_readers(g, out) > 0) dead = false;
      if (dead) {
        remove_node(g, i);
        removed = true;
      }
    }
  }
}

}  // namespace

std::vector<std::string> materialize_weights(onnx::GraphProto& g, const Graph& inferred) {
  static const std::set<std::string> readers = {"Conv", "MatMul", "Gemm", "Add"};
  std::vector<std::string> log;
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (!readers.count(n.op_type()) || !is_default_domain(n)) continue;
    for (int k = 1; k < n.input_size(); ++k) {
      const std::string& in = n.input(k);
      if (in.empty() || find_initializer(g, in) || !inferred.has_value(in)) continue;
      const Value& v = inferred.value(in);
      if (!v.constant || v.constant->dtype() != DType::Float32) continue;
      set_initializer(g, in, *v.constant);
      log.push_back("materialize_weights: '" + in + "', which " + n.op_type() + " '" + node_label(n) + "' reads, is an initializer");
    }
  }
  remove_dead_nodes(g);
  return log;
}

// Node i when it is a Conv of the default domain whose weight is a float32 initializer (rank >= 3)
// and whose bias is absent or one: the Conv the rewrites below fold constants into.
struct ConstantConv {
  Tensor weight;
  std::optional<Tensor> bias;
};
std::optional<ConstantConv> constant_conv(onnx::GraphProto& g, int i) {
  const onnx::NodeProto& conv = g.node(i);
  if (conv.op_type() != "Conv" || !is_default_domain(conv) || conv.input_size() < 2) return std::nullopt;
  auto w = float_initializer(g, conv.input(1));
  if (!w || w->rank() < 3) return std::nullopt;
  ConstantConv c{*w, std::nullopt};
  if (conv.input_size() > 2 && !conv.input(2).empty() && !(c.bias = float_initializer(g, conv.input(2)))) return std::nullopt;
  return c;
}

std::vector<std::string> conv_add_to_bias(onnx::GraphProto& g) {
  std::vector<std::string> log;
  NameSet names(g);
  for (int i = 0; i < g.node_size(); ++i) {
    const auto cc = constant_conv(g, i);
    if (!cc) continue;
    const onnx::NodeProto& conv = g.node(i);
    const Tensor& w = cc->weight;
    const std::optional<Tensor>& old_bias = cc->bias;
    auto add = constant_add_after(g, i);
    const int64_t channels = w.shape()[0];
    if (!add || !per_axis_constant(add->constant, static_cast<int>(w.rank()), 1, channels)) continue;
    Tensor bias(DType::Float32, {channels});
    for (int64_t c = 0; c < channels; ++c) {
      const float b = old_bias ? static_cast<float>(old_bias->get_double(c)) : 0.0f;
      bias.set_double(c, b + static_cast<float>(add->constant.get_double(add->constant.size() == 1 ? 0 : c)));
    }
    const std::string bias_name = names.fresh(node_label(conv) + ".bias");
    set_initializer(g, bias_name, bias);
    log.push_back("conv_add_to_bias: Add '" + node_label(g.node(add->node)) + "' is the bias of Conv '" + node_label(conv) + "'");
    absorb_add(g, i, *add, bias_name);
  }
  return log;
}

std::vector<std::string> conv_bn_to_conv(onnx::GraphProto& g) {
  std::vector<std::string> log;
  NameSet names(g);
  for (int i = 0; i < g.node_size(); ++i) {
    const auto cc = constant_conv(g, i);
    if (!cc) continue;
    const onnx::NodeProto& conv = g.node(i);
    const Tensor* w = &cc->weight;
    const std::optional<Tensor>& old_bias = cc->bias;
    auto r = sole_reader(g, conv.output(0));
    if (!r || *r <= i) continue;
    const onnx::NodeProto& bn = g.node(*r);
    if (bn.op_type() != "BatchNormalization" || !is_default_domain(bn) || bn.input_size() != 5 || bn.input(0) != conv.output(0))
      continue;
    if (bn.output_size() > 1 && std::any_of(bn.output().begin() + 1, bn.output().end(), [](const std::string& o) { return !o.empty(); }))
      continue;  // training mode's running statistics
    const int64_t channels = w->shape()[0];
    std::vector<std::optional<Tensor>> p;
    for (int k = 1; k < 5; ++k) p.push_back(float_initializer(g, bn.input(k)));
    if (std::any_of(p.begin(), p.end(), [&](const auto& t) { return !t || t->size() != channels; })) continue;
    double epsilon = 1e-5;
    for (const auto& a : bn.attribute())
      if (a.name() == "epsilon") epsilon = a.f();
    // y = (conv(x) + b - mean) * gamma / sqrt(var + eps) + beta: the factor scales the filter and the
    // bias, in double, rounded once to float32.
    Tensor folded(DType::Float32, w->shape()), bias(DType::Float32, {channels});
    const int64_t per_channel = w->size() / channels;
    for (int64_t c = 0; c < channels; ++c) {
      const double factor = p[0]->get_double(c) / std::sqrt(p[3]->get_double(c) + epsilon);
      for (int64_t k = 0; k < per_channel; ++k)
        folded.set_double(c * per_channel + k, w->get_double(c * per_channel + k) * factor);
      const double b = old_bias ? old_bias->get_double(c) : 0.0;
      bias.set_double(c, (b - p[2]->get_double(c)) * factor + p[1]->get_double(c));
    }
    const std::string weight_name = names.fresh(node_label(conv) + ".folded_weight");
    const std::string bias_name = names.fresh(node_label(conv) + ".bias");
    set_initializer(g, weight_name, folded);
    set_initializer(g, bias_name, bias);
    log.push_back("conv_bn_to_conv: BatchNormalization '" + node_label(bn) + "' is folded into Conv '" + node_label(conv) + "'");
    g.mutable_node(i)->set_input(1, weight_name);
    g.mutable_node(i)->set_output(0, bn.output(0));
    remove_node(g, *r);
    while (g.node(i).input_size() < 3) g.mutable_node(i)->add_input("");
    g.mutable_node(i)->set_input(2, bias_name);
    drop_unread_initializers(g);
  }
  return log;
}

std::vector<std::string> matmul_add_to_gemm(onnx::GraphProto& g) {
  std::vector<std::string> log;
  NameSet names(g);
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& mm = g.node(i);
    if (mm.op_type() != "MatMul" || !is_default_domain(mm) || value_rank(g, mm.input(0)) != 2) continue;
    auto b = float_initializer(g, mm.input(1));
    if (!b || b->rank() != 2) continue;
    auto add = constant_add_after(g, i);
    const int64_t columns = b->shape()[1];
    if (!add || add->constant.size() != columns || !per_axis_constant(add->constant, 2, 1, columns)) continue;
    const std::string bias_name = names.fresh(node_label(mm) + ".bias");
    set_initializer(g, bias_name, Tensor::from_doubles(DType::Float32, {columns}, add->constant.to_doubles()));
    log.push_back("matmul_add_to_gemm: MatMul '" + node_label(mm) + "' and Add '" + node_label(g.node(add->node)) + "' are one Gemm");
    g.mutable_node(i)->set_op_type("Gemm");
    absorb_add(g, i, *add, bias_name);
  }
  return log;
}

// Whether max pool `n`'s windows each hold an input element: no pad as wide as the kernel (a window
// wholly in the padding is -inf before a Relu and 0 after it), no ceil mode, no Indices output.
bool every_window_reads_the_input(const onnx::NodeProto& n) {
  if (n.output_size() > 1 && !n.output(1).empty()) return false;
  std::vector<int64_t> kernel, pads;
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (a.name() == "kernel_shape") kernel.assign(a.ints().begin(), a.ints().end());
    if (a.name() == "pads") pads.assign(a.ints().begin(), a.ints().end());
    if (a.name() == "ceil_mode" && a.i() != 0) return false;
    if (a.name() == "auto_pad" && a.s() != "NOTSET" && a.s() != "VALID") return false;
  }
  if (kernel.empty() || (!pads.empty() && pads.size() != 2 * kernel.size())) return false;
  for (size_t i = 0; i < pads.size(); ++i)
    if (pads[i] >= kernel[i % kernel.size()]) return false;
  return true;
}

std::vector<std::string> relu_before_max_pool(onnx::GraphProto& g) {
  std::vector<std::string> log;
  NameSet names(g);
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& pool = g.node(i);
    if (pool.op_type() != "MaxPool" || !is_default_domain(pool) || !every_window_reads_the_input(pool)) continue;
    auto r = sole_reader(g, pool.output(0));
    if (!r || *r <= i || !sole_reader(g, pool.input(0))) continue;
    const onnx::NodeProto& relu = g.node(*r);
    if (relu.op_type() != "Relu" || !is_default_domain(relu)) continue;
    // x -> MaxPool -> p -> Relu -> y  becomes  x -> Relu -> r -> MaxPool -> y, the Relu moved to i
    // (r is a new value: p's recorded shape, if any, is the pooled one).
    log.push_back("relu_before_max_pool: Relu '" + node_label(relu) + "' runs before MaxPool '" + node_label(pool) + "'");
    const std::string rectified = names.fresh(node_label(relu) + ".before_pool");
    onnx::NodeProto moved_relu = relu, moved_pool = pool;
    moved_relu.set_input(0, pool.input(0));
    moved_relu.set_output(0, rectified);
    moved_pool.set_input(0, rectified);
    moved_pool.set_output(0, relu.output(0));
    auto* info = g.mutable_value_info();
    for (int v = info->size() - 1; v >= 0; --v)
      if (info->Get(v).name() == pool.output(0)) info->DeleteSubrange(v, 1);
    const int at = *r;
    *g.mutable_node(at) = moved_pool;
    *g.mutable_node(i) = moved_relu;
  }
  return log;
}

}  // namespace kiln
