#include "frontend/passes/fold_into_conv.h"

#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "frontend/passes/channel_constant.h"
#include "frontend/passes/infer_shapes.h"
#include "frontend/passes/node_emitter.h"

namespace kiln {
namespace {

// y' = scale[m] * y + shift[m] for output channel m.
struct ChannelAffine {
  std::vector<double> scale, shift;
};

// What `op` does to each channel of its input `from` (the convolution's output), or nullopt when it
// is not a per-channel affine map of it with constant parameters.
std::optional<ChannelAffine> channel_affine(const Graph& g, const Node& op, const std::string& from, int64_t channels) {
  const size_t rank = g.value(from).shape.size();
  const size_t n = static_cast<size_t>(channels);
  if (op.op_type == "BatchNormalization") {
    if (op.inputs.size() < 5 || op.inputs[0] != from) return std::nullopt;
    if (op.opset < 9 && op.attr_int("spatial", 1) == 0) return std::nullopt;
    if (op.opset >= 14 && op.attr_int("training_mode", 0) != 0) return std::nullopt;
    for (size_t o = 1; o < op.outputs.size(); ++o)
      if (!op.outputs[o].empty()) return std::nullopt;
    const Tensor *scale = g.constant_input(op, 1), *bias = g.constant_input(op, 2), *mean = g.constant_input(op, 3),
                 *var = g.constant_input(op, 4);
    if (!scale || !bias || !mean || !var) return std::nullopt;
    for (const Tensor* t : {scale, bias, mean, var})
      if (t->size() != channels || !is_float(t->dtype())) return std::nullopt;
    const double eps = op.attr_float("epsilon", 1e-5);
    ChannelAffine a{std::vector<double>(n), std::vector<double>(n)};
    for (int64_t m = 0; m < channels; ++m) {
      a.scale[m] = scale->get_double(m) / std::sqrt(var->get_double(m) + eps);
      a.shift[m] = bias->get_double(m) - mean->get_double(m) * a.scale[m];
    }
    return a;
  }
  if (op.op_type != "Mul" && op.op_type != "Add") return std::nullopt;
  if (op.inputs.size() != 2 || op.outputs.size() != 1) return std::nullopt;
  const size_t other = op.inputs[0] == from ? 1 : 0;
  if (op.inputs[1 - other] != from || op.inputs[other] == from) return std::nullopt;
  const Tensor* c = g.constant_input(op, other);
  if (!c || c->dtype() != g.value(from).dtype) return std::nullopt;
  std::optional<std::vector<double>> v = per_channel_values(*c, rank, channels);
  if (!v) return std::nullopt;
  if (op.op_type == "Mul") return ChannelAffine{*v, std::vector<double>(n, 0.0)};
  return ChannelAffine{std::vector<double>(n, 1.0), *v};
}

// The output channel that weight element i of `conv` feeds: Conv's weight is M x C/group x K...,
// ConvTranspose's C x M/group x K..., whose channel c belongs to group c / (C/group).
std::vector<int64_t> output_channel_of_weight(const Node& conv, const Shape& w, int64_t channels) {
  const int64_t total = num_elements(w);
  std::vector<int64_t> m(static_cast<size_t>(total));
  if (conv.op_type == "Conv") {
    const int64_t per = total / channels;
    for (int64_t i = 0; i < total; ++i) m[i] = i / per;
    return m;
  }
  const int64_t group = conv.attr_int("group", 1);
  const int64_t kernel = total / (w[0] * w[1]), in_per_group = w[0] / group;
  for (int64_t i = 0; i < total; ++i) {
    const int64_t c = i / (w[1] * kernel), j = (i / kernel) % w[1];
    m[i] = (c / in_per_group) * w[1] + j;
  }
  return m;
}

// Whether `conv` has float constant weights (and bias) a fold can rewrite.
bool foldable_conv(const Graph& g, const Node& conv) {
  if (!conv.domain.empty() || (conv.op_type != "Conv" && conv.op_type != "ConvTranspose")) return false;
  if (conv.outputs.size() != 1 || conv.inputs.size() < 2) return false;
  const Tensor* w = g.constant_input(conv, 1);
  if (!w || (w->dtype() != DType::Float32 && w->dtype() != DType::Float64)) return false;
  if (conv.inputs.size() > 2 && !conv.inputs[2].empty()) {
    const Tensor* b = g.constant_input(conv, 2);
    if (!b || b->dtype() != w->dtype()) return false;
  }
  return g.value(conv.outputs[0]).shape.size() >= 3;
}

// Rewrites conv's weight and bias so that it computes a(conv(x)).
void apply(Graph& g, Node& conv, const ChannelAffine& a, int64_t channels) {
  const Tensor& w = *g.constant_input(conv, 1);
  const std::vector<int64_t> channel = output_channel_of_weight(conv, w.shape(), channels);
  Tensor folded_w(w.dtype(), w.shape());
  for (int64_t i = 0; i < w.size(); ++i) folded_w.set_double(i, w.get_double(i) * a.scale[channel[i]]);
  const Tensor* b = g.constant_input(conv, 2);
  Tensor folded_b(w.dtype(), {channels});
  for (int64_t m = 0; m < channels; ++m) folded_b.set_double(m, (b ? b->get_double(m) : 0.0) * a.scale[m] + a.shift[m]);
  conv.inputs.resize(3);
  conv.inputs[1] = g.add_constant(conv.name + ".folded_weight", std::move(folded_w));
  conv.inputs[2] = g.add_constant(conv.name + ".folded_bias", std::move(folded_b));
}

}  // namespace

int fold_into_conv(Graph& g) {
  std::map<std::string, size_t> producer;
  std::map<std::string, std::set<size_t>> readers;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    for (const auto& o : g.nodes[k].outputs) producer[o] = k;
    for (const auto& i : g.nodes[k].inputs) readers[i].insert(k);
  }
  const std::set<std::string> graph_outputs(g.outputs.begin(), g.outputs.end());
  std::vector<bool> removed(g.nodes.size(), false);
  int folded = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    Node& op = g.nodes[k];
    if (!op.domain.empty() || op.outputs.empty() || op.inputs.empty()) continue;
    for (const std::string& from : op.inputs) {
      auto p = producer.find(from);
      if (from.empty() || p == producer.end() || removed[p->second]) continue;
      Node& conv = g.nodes[p->second];
      if (!foldable_conv(g, conv) || readers[from].size() != 1 || graph_outputs.count(from)) continue;
      const Value& y = g.value(from);
      if (!g.value(op.outputs[0]).typed || g.value(op.outputs[0]).shape != y.shape || g.value(op.outputs[0]).dtype != y.dtype)
        continue;
      const int64_t channels = y.shape[1];
      std::optional<ChannelAffine> a = channel_affine(g, op, from, channels);
      if (!a) continue;
      apply(g, conv, *a, channels);
      conv.outputs[0] = op.outputs[0];
      producer[op.outputs[0]] = p->second;
      g.values.erase(from);
      removed[k] = true;
      ++folded;
      break;
    }
  }
  std::vector<Node> kept;
  for (size_t k = 0; k < g.nodes.size(); ++k)
    if (!removed[k]) kept.push_back(std::move(g.nodes[k]));
  g.nodes = std::move(kept);
  return folded;
}

int batch_norms_to_affine(Graph& g) {
  int rewritten = 0;
  for (size_t i = g.nodes.size(); i-- > 0;) {  // from the end, so replacing a node moves none still to visit
    const Node n = g.nodes[i];
    if (n.op_type != "BatchNormalization" || !n.domain.empty() || n.inputs.empty()) continue;
    const Value& x = g.value(n.inputs[0]);
    if (!x.typed || x.shape.size() < 2 || !is_float(x.dtype)) continue;
    const std::optional<ChannelAffine> a = channel_affine(g, n, n.inputs[0], x.shape[1]);
    if (!a) continue;
    // [C, 1, ...]: broadcast along the channel axis of an N x C x ... input.
    Shape per_channel(x.shape.size() - 1, 1);
    per_channel[0] = x.shape[1];
    auto constant = [&](const std::string& what, const std::vector<double>& v) {
      return g.add_constant(n.name + "." + what, Tensor::from_doubles(x.dtype, per_channel, v));
    };
    NodeEmitter emit(g, n);
    const std::string scaled = emit.op("Mul", {n.inputs[0], constant("scale", a->scale)});
    emit.op("Add", {scaled, constant("shift", a->shift)}, {}, n.outputs[0]);
    replace_node(g, i, emit.nodes());
    ++rewritten;
  }
  if (rewritten > 0) infer_shapes(g, {.only_untyped = true});  // the scaled values NodeEmitter leaves untyped
  return rewritten;
}

}  // namespace kiln
