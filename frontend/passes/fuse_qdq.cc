#include "frontend/passes/fuse_qdq.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

namespace kiln {
namespace {

// The indices of the nodes that read `value` (one scan: the pass asks about a few values per pattern).
std::vector<size_t> readers(const Graph& g, const std::string& value) {
  std::vector<size_t> r;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (std::find(g.nodes[i].inputs.begin(), g.nodes[i].inputs.end(), value) != g.nodes[i].inputs.end()) r.push_back(i);
  return r;
}

const Node* producer(const Graph& g, const std::string& value) {
  for (const Node& n : g.nodes)
    for (const std::string& out : n.outputs)
      if (out == value) return &n;
  return nullptr;
}

bool is_8bit(DType t) { return t == DType::Int8 || t == DType::UInt8; }

bool plain(const Node& n, const char* op) {
  return n.op_type == op && n.domain.empty() && n.opset >= 10 && n.guards.empty() && n.attr_int("block_size", 0) == 0;
}

// A DequantizeLinear's scale and zero point, when they are constants of `count` elements (or one, per
// tensor), `axis` being the axis a per-element scale runs along.
struct Quantization {
  const Tensor* scale = nullptr;
  const Tensor* zero_point = nullptr;  // null: absent (zero)
};
std::optional<Quantization> quantization(const Graph& g, const Node& dq, int64_t count, int64_t axis, int64_t rank) {
  Quantization q;
  q.scale = g.constant_input(dq, 1);
  if (!q.scale || q.scale->dtype() != DType::Float32) return std::nullopt;
  if (dq.inputs.size() > 2 && !dq.inputs[2].empty()) {
    q.zero_point = g.constant_input(dq, 2);
    if (!q.zero_point || q.zero_point->size() != q.scale->size()) return std::nullopt;
  }
  if (q.scale->size() == 1) return q;
  if (q.scale->size() != count || q.scale->shape().size() != 1) return std::nullopt;
  int64_t a = dq.opset >= 13 ? dq.attr_int("axis", 1) : 1;
  if (a < 0) a += rank;
  return a == axis ? std::optional<Quantization>(q) : std::nullopt;
}

struct Match {
  size_t op = 0, quantize = 0;  // node indices
  const Node* dq_x = nullptr;
  const Node* dq_w = nullptr;
  const Node* dq_b = nullptr;
};

// The single QuantizeLinear reading `out` (nothing else reads it, nor is it a graph output).
std::optional<size_t> sole_quantize(const Graph& g, const std::string& out) {
  const std::vector<size_t> r = readers(g, out);
  if (r.size() != 1 || std::find(g.outputs.begin(), g.outputs.end(), out) != g.outputs.end()) return std::nullopt;
  const Node& q = g.nodes[r[0]];
  if (!plain(q, "QuantizeLinear") || q.inputs[0] != out || q.inputs.size() < 3 || q.inputs[2].empty()) return std::nullopt;
  const Tensor *s = g.constant_input(q, 1), *z = g.constant_input(q, 2);
  if (!s || !z || s->size() != 1 || z->size() != 1 || s->dtype() != DType::Float32 || !is_8bit(z->dtype()))
    return std::nullopt;
  if (q.opset >= 21 && q.attr_int("output_dtype", 0) != 0) return std::nullopt;
  return r[0];
}

// The activation's DequantizeLinear: per tensor, of an 8-bit value.
const Node* activation_dq(const Graph& g, const std::string& value) {
  const Node* dq = producer(g, value);
  if (!dq || !plain(*dq, "DequantizeLinear")) return nullptr;
  auto q = quantization(g, *dq, 1, 0, 0);
  if (!q || q->scale->size() != 1) return nullptr;
  if (q->zero_point && !is_8bit(q->zero_point->dtype())) return nullptr;
  if (!q->zero_point && g.value(dq->inputs[0]).typed && !is_8bit(g.value(dq->inputs[0]).dtype)) return nullptr;
  return dq;
}

// The weight's DequantizeLinear: of an 8-bit constant, per tensor or along `axis` (`count` scales).
const Node* weight_dq(const Graph& g, const std::string& value, int64_t axis, int64_t count_dim) {
  const Node* dq = producer(g, value);
  if (!dq || !plain(*dq, "DequantizeLinear")) return nullptr;
  const Tensor* w = g.constant_input(*dq, 0);
  if (!w || !is_8bit(w->dtype()) || static_cast<int64_t>(w->shape().size()) <= axis) return nullptr;
  const int64_t rank = static_cast<int64_t>(w->shape().size());
  auto q = quantization(g, *dq, w->shape()[static_cast<size_t>(count_dim)], axis, rank);
  if (!q || (q->zero_point && q->zero_point->dtype() != w->dtype())) return nullptr;
  return dq;
}

float f32(const Tensor& t, int64_t i) { return static_cast<float>(t.get_double(t.size() == 1 ? 0 : i)); }

// The bias's DequantizeLinear: int32, zero point zero, its scale x_scale * w_scale in float32 for every
// one of `channels` output channels.
const Node* bias_dq(const Graph& g, const std::string& value, const Node& dq_x, const Node& dq_w, int64_t channels) {
  const Node* dq = producer(g, value);
  if (!dq || !plain(*dq, "DequantizeLinear")) return nullptr;
  const Tensor* b = g.constant_input(*dq, 0);
  if (!b || b->dtype() != DType::Int32 || b->size() != channels) return nullptr;
  auto qb = quantization(g, *dq, channels, 0, 1);
  if (!qb) return nullptr;
  if (qb->zero_point)
    for (int64_t k = 0; k < qb->zero_point->size(); ++k)
      if (qb->zero_point->get_int(k) != 0) return nullptr;
  const Tensor& xs = *g.constant_input(dq_x, 1);
  const Tensor& ws = *g.constant_input(dq_w, 1);
  for (int64_t k = 0; k < channels; ++k) {
    const float want = f32(xs, 0) * f32(ws, k), have = f32(*qb->scale, k);
    if (std::memcmp(&want, &have, sizeof want) != 0) return nullptr;
  }
  return dq;
}

std::optional<Match> match_conv(const Graph& g, size_t i) {
  const Node& conv = g.nodes[i];
  if (conv.op_type != "Conv" || !conv.domain.empty() || !conv.guards.empty() || conv.inputs.size() < 2) return std::nullopt;
  Match m;
  m.op = i;
  if (!(m.dq_x = activation_dq(g, conv.inputs[0]))) return std::nullopt;
  if (!(m.dq_w = weight_dq(g, conv.inputs[1], 0, 0))) return std::nullopt;
  const Tensor& w = *g.constant_input(*m.dq_w, 0);
  const int64_t channels = w.shape()[0];
  if (conv.inputs.size() > 2 && !conv.inputs[2].empty() && !(m.dq_b = bias_dq(g, conv.inputs[2], *m.dq_x, *m.dq_w, channels)))
    return std::nullopt;
  auto q = sole_quantize(g, conv.outputs[0]);
  if (!q) return std::nullopt;
  m.quantize = *q;
  return m;
}

std::optional<Match> match_matmul(const Graph& g, size_t i) {
  const Node& mm = g.nodes[i];
  if (mm.op_type != "MatMul" || !mm.domain.empty() || !mm.guards.empty()) return std::nullopt;
  Match m;
  m.op = i;
  if (!(m.dq_x = activation_dq(g, mm.inputs[0]))) return std::nullopt;
  if (!(m.dq_w = weight_dq(g, mm.inputs[1], 1, 1))) return std::nullopt;  // per column of [K, N]
  if (g.constant_input(*m.dq_w, 0)->shape().size() != 2) return std::nullopt;  // a matrix, not a batch
  auto q = sole_quantize(g, mm.outputs[0]);
  if (!q) return std::nullopt;
  m.quantize = *q;
  return m;
}

// Gemm of an activation [M, K] by a constant weight (B [K, N], or [N, K] with transB), alpha 1, beta 1
// or no bias: ONNX Runtime's QGemm, whose requantization multiplier is a_scale * b_scale / y_scale like
// QLinearConv's. Its bias is checked as a Conv's, per output column.
std::optional<Match> match_gemm(const Graph& g, size_t i) {
  const Node& gemm = g.nodes[i];
  if (gemm.op_type != "Gemm" || !gemm.domain.empty() || !gemm.guards.empty() || gemm.inputs.size() < 2) return std::nullopt;
  if (gemm.attr_int("transA", 0) != 0 || gemm.attr_float("alpha", 1.0) != 1.0) return std::nullopt;
  const bool trans_b = gemm.attr_int("transB", 0) != 0;
  Match m;
  m.op = i;
  if (!(m.dq_x = activation_dq(g, gemm.inputs[0]))) return std::nullopt;
  const int64_t column_axis = trans_b ? 0 : 1;
  if (!(m.dq_w = weight_dq(g, gemm.inputs[1], column_axis, column_axis))) return std::nullopt;
  const Tensor& w = *g.constant_input(*m.dq_w, 0);
  if (w.rank() != 2) return std::nullopt;
  if (gemm.inputs.size() > 2 && !gemm.inputs[2].empty()) {
    if (gemm.attr_float("beta", 1.0) != 1.0) return std::nullopt;
    if (!(m.dq_b = bias_dq(g, gemm.inputs[2], *m.dq_x, *m.dq_w, w.shape()[static_cast<size_t>(column_axis)]))) return std::nullopt;
  }
  auto q = sole_quantize(g, gemm.outputs[0]);
  if (!q) return std::nullopt;
  m.quantize = *q;
  return m;
}

std::optional<Match> match(const Graph& g, size_t i) {
  if (auto m = match_conv(g, i)) return m;
  if (auto m = match_gemm(g, i)) return m;
  return match_matmul(g, i);
}

// The zero point `dq` reads, or a new zero of `dtype` when it reads none.
std::string zero_point_or_zero(Graph& g, const Node& dq, DType dtype) {
  if (dq.inputs.size() > 2 && !dq.inputs[2].empty()) return dq.inputs[2];
  return g.add_constant(dq.outputs[0] + ".zero_point", Tensor(dtype, Shape{}));
}

// A Gemm is a 1x1 convolution of a batch of M images of K channels and one pixel: the activation is
// reshaped to [M, K, 1, 1], the int8 weight made [N, K, 1, 1] (transposed unless transB), and the
// result reshaped back to [M, N]. `conv` is the QLinearConv with the Gemm's operands.
std::vector<Node> gemm_as_conv(Graph& g, const Node& gemm, Node conv) {
  const Value& x = g.value(conv.inputs[0]);
  const Value& y = g.value(conv.outputs[0]);
  const Tensor& w = *g.constant_input(conv, 3);
  const bool trans_b = gemm.attr_int("transB", 0) != 0;
  const int64_t n = trans_b ? w.shape()[0] : w.shape()[1], k = trans_b ? w.shape()[1] : w.shape()[0];
  Tensor w4(w.dtype(), {n, k, 1, 1});
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) w4.set_int(r * k + c, w.get_int(trans_b ? r * k + c : c * n + r));
  auto reshape = [&](const std::string& in, const std::string& out, const Shape& to, const std::string& name) {
    Node r;
    r.name = name;
    r.op_type = "Reshape";
    r.opset = gemm.opset;
    r.inputs = {in, g.add_constant(name + ".shape", Tensor::from_ints(DType::Int64, {static_cast<int64_t>(to.size())}, to))};
    r.outputs = {out};
    return r;
  };
  const std::string x4 = g.add_value(conv.inputs[0] + ".nchw", x.dtype, {x.shape[0], k, 1, 1});
  const std::string y4 = g.add_value(conv.outputs[0] + ".nchw", y.dtype, {x.shape[0], n, 1, 1});
  const std::string y_name = conv.outputs[0];
  Node in = reshape(conv.inputs[0], x4, g.value(x4).shape, gemm.name + ".images");
  conv.inputs[0] = x4;
  conv.inputs[3] = g.add_constant(gemm.name + ".weight_nk11", std::move(w4));
  conv.outputs = {y4};
  Node out = reshape(y4, y_name, g.value(y_name).shape, gemm.name + ".rows");
  return {in, conv, out};
}

}  // namespace

bool is_fused_qdq_weight(const Graph& g, const Node& dq) {
  if (dq.op_type != "DequantizeLinear" || !g.constant_input(dq, 0)) return false;
  const std::vector<size_t> r = readers(g, dq.outputs[0]);
  if (r.size() != 1) return false;
  auto m = match(g, r[0]);
  return m && (m->dq_w == &dq || m->dq_b == &dq);
}

int fuse_qdq(Graph& g) {
  int fused = 0;
  size_t i = 0;
  while (i < g.nodes.size()) {
    auto m = match(g, i);
    if (!m) {
      ++i;
      continue;
    }
    const Node op = g.nodes[m->op];
    const Node q = g.nodes[m->quantize];
    const Node dq_x = *m->dq_x, dq_w = *m->dq_w;
    const DType x_dtype = g.value(dq_x.inputs[0]).dtype, w_dtype = g.constant_input(dq_w, 0)->dtype();
    Node fused_node;
    fused_node.name = op.name;
    fused_node.domain = "";
    fused_node.opset = op.opset;
    fused_node.op_type = op.op_type == "MatMul" ? "QLinearMatMul" : "QLinearConv";
    if (op.op_type == "Conv") fused_node.attrs = op.attrs;
    fused_node.inputs = {dq_x.inputs[0], dq_x.inputs[1], zero_point_or_zero(g, dq_x, x_dtype),
                         dq_w.inputs[0], dq_w.inputs[1], zero_point_or_zero(g, dq_w, w_dtype),
                         q.inputs[1],    q.inputs[2]};
    if (m->dq_b) fused_node.inputs.push_back(m->dq_b->inputs[0]);
    fused_node.outputs = {q.outputs[0]};
    // The QuantizeLinear comes after everything the pattern reads: the fused nodes take its place.
    std::vector<Node> nodes = {fused_node};
    if (op.op_type == "Gemm") nodes = gemm_as_conv(g, op, fused_node);
    g.nodes[m->quantize] = nodes.back();
    g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(m->quantize), nodes.begin(), nodes.end() - 1);
    g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(m->op));  // the next node moves to index i
    ++fused;
  }
  return fused;
}

}  // namespace kiln
