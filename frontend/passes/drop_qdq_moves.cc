#include "frontend/passes/drop_qdq_moves.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <set>

namespace kiln {
namespace {

bool is_move(const Node& n) {
  static const std::set<std::string> moves = {"MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze",
                                              "Identity"};
  if (!n.domain.empty() || !n.guards.empty() || !moves.count(n.op_type) || n.outputs.empty()) return false;
  if (n.op_type == "MaxPool") {
    // MaxPool's Indices are positions, not codes; int8 MaxPool is opset 12's.
    if (n.opset < 12 || (n.outputs.size() > 1 && !n.outputs[1].empty())) return false;
    // A window wholly in the padding gives 0 in either form, which is the zero point's code only in
    // the float one: such pads keep the float form.
    const std::vector<int64_t> k = n.attr_ints("kernel_shape"), pads = n.attr_ints("pads");
    for (size_t i = 0; i < pads.size(); ++i)
      if (k.empty() || pads[i] >= k[i % k.size()]) return false;
  }
  return true;
}

std::vector<size_t> readers(const Graph& g, const std::string& value) {
  std::vector<size_t> r;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (std::find(g.nodes[i].inputs.begin(), g.nodes[i].inputs.end(), value) != g.nodes[i].inputs.end()) r.push_back(i);
  return r;
}

// A per-tensor, 8-bit, constant quantization: its scale and zero point.
struct Params {
  const Tensor* scale = nullptr;
  const Tensor* zero_point = nullptr;
};
std::optional<Params> params(const Graph& g, const Node& n) {
  if (n.domain.size() || !n.guards.empty() || n.attr_int("block_size", 0) != 0 || n.inputs.size() < 3) return std::nullopt;
  if (n.op_type == "QuantizeLinear" && n.attr_int("output_dtype", 0) != 0) return std::nullopt;
  Params p{g.constant_input(n, 1), g.constant_input(n, 2)};
  if (!p.scale || !p.zero_point || p.scale->size() != 1 || p.zero_point->size() != 1) return std::nullopt;
  if (p.scale->dtype() != DType::Float32) return std::nullopt;
  if (p.zero_point->dtype() != DType::Int8 && p.zero_point->dtype() != DType::UInt8) return std::nullopt;
  return p;
}

bool same(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.byte_size() == b.byte_size() && std::memcmp(a.data(), b.data(), a.byte_size()) == 0;
}

bool same_params(const Params& a, const Params& b) { return same(*a.scale, *b.scale) && same(*a.zero_point, *b.zero_point); }

bool is_graph_output(const Graph& g, const std::string& v) {
  return std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
}

std::optional<size_t> producer(const Graph& g, const std::string& v) {
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (std::find(g.nodes[i].outputs.begin(), g.nodes[i].outputs.end(), v) != g.nodes[i].outputs.end()) return i;
  return std::nullopt;
}

// Dropout at inference is the identity; a quantized one is an Identity (Dropout takes floats only).
bool is_unread_mask_dropout(const Graph& g, const Node& n) {
  return n.domain.empty() && n.guards.empty() && n.op_type == "Dropout" &&
         (n.outputs.size() < 2 || n.outputs[1].empty() || readers(g, n.outputs[1]).empty());
}

// Moves QuantizeLinear `qi` before its input's producer when that is a move or a Concat read by it
// alone; returns where the QuantizeLinears it put there begin, or nullopt when it moved nothing.
std::optional<size_t> quantize_before_producer(Graph& g, size_t qi) {
  const Node q = g.nodes[qi];
  if (q.op_type != "QuantizeLinear" || !params(g, q)) return std::nullopt;
  const std::string x = q.inputs[0];
  const std::optional<size_t> pi = producer(g, x);
  if (!pi || readers(g, x).size() != 1 || is_graph_output(g, x)) return std::nullopt;
  Node& p = g.nodes[*pi];
  const bool concat = p.op_type == "Concat" && p.domain.empty() && p.guards.empty();
  const bool dropout = is_unread_mask_dropout(g, p);
  if (!concat && !dropout && !is_move(p)) return std::nullopt;
  const DType code = g.value(q.outputs[0]).dtype;
  std::vector<Node> quantize;
  for (size_t k = 0; k < (concat ? p.inputs.size() : 1); ++k) {
    Node nq = q;
    nq.name = q.name + (concat ? "." + std::to_string(k) : std::string());
    nq.inputs[0] = p.inputs[k];
    nq.outputs = {g.add_value(p.inputs[k] + ".q", code, g.value(p.inputs[k]).shape)};
    p.inputs[k] = nq.outputs[0];
    quantize.push_back(std::move(nq));
  }
  p.outputs[0] = q.outputs[0];
  if (dropout) {
    p.op_type = "Identity";
    p.opset = 13;
    p.attrs.clear();
    p.inputs.resize(1);
    p.outputs.resize(1);
  }
  g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(qi));  // after p: the graph is in order
  g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(*pi), quantize.begin(), quantize.end());
  return pi;
}

}  // namespace

int drop_qdq_around_moves(Graph& g) {
  int dropped = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (!is_move(g.nodes[i])) continue;
    const std::string in = g.nodes[i].inputs[0], out = g.nodes[i].outputs[0];
    const Node* dq = nullptr;
    for (const Node& n : g.nodes)
      if (n.op_type == "DequantizeLinear" && n.outputs[0] == in) dq = &n;
    const std::vector<size_t> r = readers(g, out);
    if (!dq || r.size() != 1 || std::find(g.outputs.begin(), g.outputs.end(), out) != g.outputs.end()) continue;
    const Node& q = g.nodes[r[0]];
    if (q.op_type != "QuantizeLinear" || q.inputs[0] != out) continue;
    auto pd = params(g, *dq), pq = params(g, q);
    if (!pd || !pq || !same_params(*pd, *pq)) continue;
    // The move reads the codes and writes the QuantizeLinear's output; the QuantizeLinear goes.
    const std::string codes = dq->inputs[0], quantized = q.outputs[0];
    const size_t q_index = r[0];
    g.nodes[i].inputs[0] = codes;
    g.nodes[i].outputs[0] = quantized;
    g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(q_index));
    ++dropped;
  }
  return dropped;
}

int quantize_before_moves(Graph& g) {
  int moved = 0;
  for (size_t i = 0; i < g.nodes.size();) {
    const std::optional<size_t> placed = quantize_before_producer(g, i);
    if (!placed) {
      ++i;
      continue;
    }
    ++moved;
    // The new QuantizeLinears may move on up; the nodes before them are as they were.
    i = *placed;
  }
  // QuantizeLinear(DequantizeLinear(a)) with one set of parameters is a.
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& q = g.nodes[i];
    if (q.op_type != "QuantizeLinear" || is_graph_output(g, q.outputs[0])) continue;
    const std::optional<size_t> di = producer(g, q.inputs[0]);
    if (!di || g.nodes[*di].op_type != "DequantizeLinear") continue;
    const auto pq = params(g, q), pd = params(g, g.nodes[*di]);
    if (!pq || !pd || !same_params(*pq, *pd)) continue;
    const std::string codes = g.nodes[*di].inputs[0], quantized = q.outputs[0];
    for (Node& n : g.nodes)
      for (std::string& in : n.inputs)
        if (in == quantized) in = codes;
    g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(i--));
    ++moved;
  }
  return moved;
}

}  // namespace kiln
