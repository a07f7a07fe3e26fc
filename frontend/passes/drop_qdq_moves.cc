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
    if (!pd || !pq || !same(*pd->scale, *pq->scale) || !same(*pd->zero_point, *pq->zero_point)) continue;
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

}  // namespace kiln
