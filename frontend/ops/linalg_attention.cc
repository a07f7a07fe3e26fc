// Attention (ONNX opset 23/24 scaled dot-product attention) and RotaryEmbedding (opset 23).
#include <algorithm>
#include <cmath>
#include <limits>

#include "frontend/ops/linalg_internal.h"

namespace kiln::linalg {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Attention inputs, by position.
enum AttnInput { kQ = 0, kK, kV, kMask, kPastKey, kPastValue, kNonpadKvSeqlen };
// Attention outputs, by position.
enum AttnOutput { kY = 0, kPresentKey, kPresentValue, kQkOutput };

// Extents of one Attention node. Internally every tensor is handled in the 4-D layout
// [batch, heads, sequence, head_size]; 3-D inputs [batch, sequence, heads * head_size] are converted.
struct AttentionDims {
  bool is_3d = false;
  int64_t batch = 0, q_heads = 0, kv_heads = 0;
  int64_t q_seq = 0, kv_seq = 0, past_seq = 0, total_seq = 0;
  int64_t head_size = 0, v_head_size = 0;
  Shape mask;  // empty when there is no mask
  bool has_past = false, has_mask = false, has_nonpad = false;

  Shape y_shape() const {
    return is_3d ? Shape{batch, q_seq, q_heads * v_head_size} : Shape{batch, q_heads, q_seq, v_head_size};
  }
};

// `shape(i)` is input i's shape; `present(i)` says whether the optional input i is given.
template <typename ShapeOf, typename Present>
AttentionDims attention_dims(const Node& node, ShapeOf shape, Present present) {
  auto fail = [&](const std::string& msg) { throw Error(node.label() + ": " + msg); };
  const Shape &q = shape(kQ), &k = shape(kK), &v = shape(kV);
  AttentionDims d;
  if (q.size() != k.size() || q.size() != v.size() || (q.size() != 3 && q.size() != 4))
    fail("Q, K and V must all be 3-D or all 4-D, got " + shape_str(q) + ", " + shape_str(k) + ", " + shape_str(v));
  d.is_3d = q.size() == 3;
  d.batch = q[0];
  if (k[0] != d.batch || v[0] != d.batch) fail("Q, K and V disagree on the batch size");
  if (d.is_3d) {
    d.q_heads = node.attr_int("q_num_heads", 0);
    d.kv_heads = node.attr_int("kv_num_heads", 0);
    if (d.q_heads <= 0 || d.kv_heads <= 0) fail("3-D inputs need positive q_num_heads and kv_num_heads attributes");
    if (q[2] % d.q_heads || k[2] % d.kv_heads || v[2] % d.kv_heads)
      fail("hidden sizes " + std::to_string(q[2]) + ", " + std::to_string(k[2]) + ", " + std::to_string(v[2]) +
           " are not divisible by the head counts");
    d.q_seq = q[1];
    d.kv_seq = k[1];
    if (v[1] != d.kv_seq) fail("K and V disagree on the sequence length");
    d.head_size = q[2] / d.q_heads;
    if (k[2] / d.kv_heads != d.head_size) fail("Q and K head sizes differ");
    d.v_head_size = v[2] / d.kv_heads;
  } else {
    d.q_heads = q[1];
    d.kv_heads = k[1];
    if (v[1] != d.kv_heads) fail("K and V disagree on the number of heads");
    d.q_seq = q[2];
    d.kv_seq = k[2];
    if (v[2] != d.kv_seq) fail("K and V disagree on the sequence length");
    d.head_size = q[3];
    if (k[3] != d.head_size) fail("Q and K head sizes differ");
    d.v_head_size = v[3];
  }
  if (d.kv_heads <= 0 || d.q_heads % d.kv_heads != 0)
    fail("q_num_heads " + std::to_string(d.q_heads) + " is not a multiple of kv_num_heads " + std::to_string(d.kv_heads));

  if (present(kPastKey) != present(kPastValue)) fail("past_key and past_value must be given together");
  d.has_past = present(kPastKey);
  if (d.has_past) {
    const Shape &pk = shape(kPastKey), &pv = shape(kPastValue);
    if (pk.size() != 4 || pk[0] != d.batch || pk[1] != d.kv_heads || pk[3] != d.head_size)
      fail("past_key of shape " + shape_str(pk) + " does not match K");
    if (pv.size() != 4 || pv[0] != d.batch || pv[1] != d.kv_heads || pv[2] != pk[2] || pv[3] != d.v_head_size)
      fail("past_value of shape " + shape_str(pv) + " does not match V and past_key");
    d.past_seq = pk[2];
  }
  d.total_seq = d.past_seq + d.kv_seq;

  d.has_mask = present(kMask);
  if (d.has_mask) {
    d.mask = shape(kMask);
    // Broadcast against [batch, q_heads, q_seq, total_seq]; a short last axis is padded as masked out.
    Shape full{d.batch, d.q_heads, d.q_seq, d.total_seq};
    size_t r = d.mask.size();
    bool ok = r >= 1 && r <= 4 && d.mask[r - 1] <= d.total_seq;
    for (size_t i = 0; ok && i + 1 < r; ++i) {
      int64_t want = full[4 - r + i];
      ok = d.mask[i] == 1 || d.mask[i] == want;
    }
    if (!ok) fail("attn_mask of shape " + shape_str(d.mask) + " does not broadcast to " + shape_str(full));
  }
  d.has_nonpad = present(kNonpadKvSeqlen);
  if (d.has_nonpad && shape(kNonpadKvSeqlen) != Shape{d.batch})
    fail("nonpad_kv_seqlen must have shape [" + std::to_string(d.batch) + "], got " + shape_str(shape(kNonpadKvSeqlen)));
  return d;
}

void attention_infer(InferContext& c) {
  c.require_input(kQ, "Q");
  c.require_input(kK, "K");
  c.require_input(kV, "V");
  const Node& n = c.node();
  DType t = c.dtype(kQ);
  if (!is_float(t)) c.unsupported("dtype " + dtype_name(t) + " is not supported");
  for (size_t i : {kK, kV, kPastKey, kPastValue})
    if (c.has_input(i) && c.dtype(i) != t) c.fail("input " + std::to_string(i) + " has dtype " + dtype_name(c.dtype(i)) + ", expected " + dtype_name(t));
  if (c.has_input(kMask) && c.dtype(kMask) != DType::Bool && c.dtype(kMask) != t)
    c.fail("attn_mask must be bool or " + dtype_name(t) + ", got " + dtype_name(c.dtype(kMask)));
  if (c.has_input(kNonpadKvSeqlen) && c.dtype(kNonpadKvSeqlen) != DType::Int64)
    c.fail("nonpad_kv_seqlen must be int64");
  int64_t mode = n.attr_int("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3) c.fail("qk_matmul_output_mode must be 0..3, got " + std::to_string(mode));
  if (n.has_attr("softmax_precision")) {
    DType p = dtype_attr(n, "softmax_precision", n.attr_int("softmax_precision", 0));
    if (!is_float(p)) c.fail("softmax_precision must name a float dtype");
  }
  AttentionDims d = attention_dims(
      n, [&](size_t i) -> const Shape& { return c.shape(i); }, [&](size_t i) { return c.has_input(i); });
  c.set_output(kY, t, d.y_shape());
  c.set_output(kPresentKey, t, {d.batch, d.kv_heads, d.total_seq, d.head_size});
  c.set_output(kPresentValue, t, {d.batch, d.kv_heads, d.total_seq, d.v_head_size});
  c.set_output(kQkOutput, t, {d.batch, d.q_heads, d.q_seq, d.total_seq});
}

// A [batch, seq, heads * size] or [batch, heads, seq, size] tensor as doubles in [batch, heads, seq, size].
std::vector<double> to_bhsd(const Tensor& t, bool is_3d, int64_t heads) {
  std::vector<double> v = t.to_doubles();
  if (!is_3d) return v;
  const Shape& s = t.shape();
  int64_t b = s[0], seq = s[1], size = s[2] / heads;
  std::vector<double> out(v.size());
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t si = 0; si < seq; ++si)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t e = 0; e < size; ++e)
          out[((bi * heads + h) * seq + si) * size + e] = v[((bi * seq + si) * heads + h) * size + e];
  return out;
}

// past ++ current along the sequence axis, both [batch, heads, seq, size].
std::vector<double> concat_seq(const std::vector<double>& past, const std::vector<double>& cur, int64_t bh,
                               int64_t past_seq, int64_t cur_seq, int64_t size) {
  std::vector<double> out(static_cast<size_t>(bh * (past_seq + cur_seq) * size));
  auto it = out.begin();
  for (int64_t i = 0; i < bh; ++i) {
    it = std::copy_n(past.begin() + i * past_seq * size, past_seq * size, it);
    it = std::copy_n(cur.begin() + i * cur_seq * size, cur_seq * size, it);
  }
  return out;
}

void attention_eval(EvalContext& c) {
  const Node& n = c.node();
  AttentionDims d = attention_dims(
      n, [&](size_t i) -> const Shape& { return c.input(i).shape(); }, [&](size_t i) { return c.has_input(i); });
  const DType t = c.input(kQ).dtype();
  const int64_t B = d.batch, Hq = d.q_heads, Hkv = d.kv_heads, S = d.q_seq, T = d.total_seq;
  const int64_t D = d.head_size, Dv = d.v_head_size, group = Hq / Hkv;

  std::vector<double> q = to_bhsd(c.input(kQ), d.is_3d, Hq);
  std::vector<double> k = to_bhsd(c.input(kK), d.is_3d, Hkv);
  std::vector<double> v = to_bhsd(c.input(kV), d.is_3d, Hkv);
  if (d.has_past) {
    k = concat_seq(c.input(kPastKey).to_doubles(), k, B * Hkv, d.past_seq, d.kv_seq, D);
    v = concat_seq(c.input(kPastValue).to_doubles(), v, B * Hkv, d.past_seq, d.kv_seq, Dv);
  }

  const double scale = n.has_attr("scale") ? n.attr_float("scale", 1.0) : 1.0 / std::sqrt(static_cast<double>(D));
  const double softcap = n.attr_float("softcap", 0.0);
  const bool causal = n.attr_int("is_causal", 0) != 0;
  const int64_t mode = n.attr_int("qk_matmul_output_mode", 0);
  const DType softmax_dtype =
      n.has_attr("softmax_precision") ? dtype_attr(n, "softmax_precision", n.attr_int("softmax_precision", 0)) : t;

  // Causal masking is aligned bottom-right by the number of keys before this query block: the past
  // length, or (external cache, no past) nonpad_kv_seqlen[b] - q_seq.
  std::vector<int64_t> nonpad;
  if (d.has_nonpad) {
    nonpad = c.input(kNonpadKvSeqlen).to_ints();
    for (int64_t len : nonpad)
      if (len < 0 || len > T)
        c.fail("nonpad_kv_seqlen value " + std::to_string(len) + " is outside [0, " + std::to_string(T) + "]");
  }

  // Mask element strides in the broadcast [batch, q_heads, q_seq] index space.
  const Tensor* mask = d.has_mask ? &c.input(kMask) : nullptr;
  int64_t mask_stride[3] = {0, 0, 0};
  int64_t mask_cols = 0;
  if (mask) {
    size_t r = d.mask.size();
    std::vector<int64_t> st = strides_of(d.mask);
    mask_cols = d.mask[r - 1];
    for (size_t i = 0; i + 1 < r; ++i) {
      size_t full_axis = 4 - r + i;  // 0 = batch, 1 = heads, 2 = q_seq
      if (d.mask[i] != 1) mask_stride[full_axis] = st[i];
    }
  }
  const bool bool_mask = mask && mask->dtype() == DType::Bool;

  Tensor y(t, d.y_shape());
  Tensor qk_out(t, {B, Hq, S, T});
  std::vector<double> raw(T), capped(T), biased(T), prob(T);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t kvh = h / group;  // each K/V head serves `group` consecutive query heads
      const double* kb = k.data() + (b * Hkv + kvh) * T * D;
      const double* vb = v.data() + (b * Hkv + kvh) * T * Dv;
      for (int64_t i = 0; i < S; ++i) {
        const double* qi = q.data() + ((b * Hq + h) * S + i) * D;
        int64_t offset = d.has_past ? d.past_seq : d.has_nonpad ? nonpad[b] - S : 0;
        int64_t mask_row = b * mask_stride[0] + h * mask_stride[1] + i * mask_stride[2];
        for (int64_t j = 0; j < T; ++j) {
          double dot = 0.0;
          for (int64_t e = 0; e < D; ++e) dot += qi[e] * kb[j * D + e];
          raw[j] = dot * scale;
          // Softcap comes before the mask so masked-out (-inf) scores stay -inf.
          capped[j] = softcap > 0 ? softcap * std::tanh(raw[j] / softcap) : raw[j];
          double bias = 0.0;
          if (mask) {
            if (j >= mask_cols) bias = kNegInf;
            else if (bool_mask) bias = mask->get_int(mask_row + j) ? 0.0 : kNegInf;
            else bias = mask->get_double(mask_row + j);
          }
          if (causal && j > i + offset) bias = kNegInf;
          if (d.has_nonpad && j >= nonpad[b]) bias = kNegInf;
          biased[j] = capped[j] + bias;
        }
        // Softmax in the requested precision; a row with every key masked out attends to nothing.
        double mx = kNegInf;
        for (int64_t j = 0; j < T; ++j) {
          biased[j] = round_to_dtype(biased[j], softmax_dtype);
          mx = std::max(mx, biased[j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j < T; ++j) {
          prob[j] = mx == kNegInf ? 0.0 : std::exp(biased[j] - mx);
          sum += prob[j];
        }
        for (int64_t j = 0; j < T; ++j) prob[j] = sum > 0 ? round_to_dtype(prob[j] / sum, softmax_dtype) : 0.0;

        const std::vector<double>& qk = mode == 0 || mode == 1 ? capped : mode == 2 ? biased : prob;
        for (int64_t j = 0; j < T; ++j) qk_out.set_double(((b * Hq + h) * S + i) * T + j, qk[j]);
        for (int64_t e = 0; e < Dv; ++e) {
          double acc = 0.0;
          for (int64_t j = 0; j < T; ++j)
            if (prob[j] != 0.0) acc += prob[j] * vb[j * Dv + e];
          int64_t out = d.is_3d ? ((b * S + i) * Hq + h) * Dv + e : ((b * Hq + h) * S + i) * Dv + e;
          y.set_double(out, acc);
        }
      }
    }
  c.set_output(kY, std::move(y));
  c.set_output(kPresentKey, Tensor::from_doubles(t, {B, Hkv, T, D}, k));
  c.set_output(kPresentValue, Tensor::from_doubles(t, {B, Hkv, T, Dv}, v));
  c.set_output(kQkOutput, std::move(qk_out));
}

double attention_flops(const NodeShapes& s) {
  auto present = [&](size_t i) { return i < s.in.size() && !s.node.inputs[i].empty(); };
  AttentionDims d = attention_dims(s.node, [&](size_t i) -> const Shape& { return s.in.at(i); }, present);
  double rows = static_cast<double>(d.batch * d.q_heads * d.q_seq);
  double t = static_cast<double>(d.total_seq);
  // QK^T (2*D per score), scale + mask add (2), softmax (exp, subtract max, sum, divide: 4),
  // softcap (3 when on), then P*V (2*Dv per score).
  double per_score = 2.0 * static_cast<double>(d.head_size) + 2.0 + 4.0 + 2.0 * static_cast<double>(d.v_head_size);
  if (s.node.attr_float("softcap", 0.0) > 0) per_score += 3.0;
  return rows * t * per_score;
}

OpDef attention_op() {
  OpDef d;
  d.op_type = "Attention";
  d.infer = attention_infer;
  d.eval = attention_eval;
  d.flops = attention_flops;
  return d;
}

// ---- RotaryEmbedding: rotates pairs of features of each head by position-dependent angles.
// Inputs: input ([batch, heads, seq, head] or [batch, seq, heads * head]), cos_cache, sin_cache,
// optional position_ids [batch, seq]. Without position_ids the caches are [batch, seq, rotary/2],
// with them [max_position, rotary/2].

struct RotaryDims {
  int64_t batch, seq, heads, head_size, rotary;
  bool is_3d;
};

RotaryDims rotary_dims(const Node& node, const Shape& x, const Shape& cos, const Shape& sin, const Shape* pos) {
  auto fail = [&](const std::string& msg) { throw Error(node.label() + ": " + msg); };
  RotaryDims r{};
  if (x.size() == 4) {
    r.is_3d = false;
    r.batch = x[0];
    r.heads = x[1];
    r.seq = x[2];
    r.head_size = x[3];
  } else if (x.size() == 3) {
    r.is_3d = true;
    r.batch = x[0];
    r.seq = x[1];
    r.heads = node.attr_int("num_heads", 0);
    if (r.heads <= 0 || x[2] % r.heads) fail("3-D input needs a num_heads attribute dividing " + std::to_string(x[2]));
    r.head_size = x[2] / r.heads;
  } else {
    fail("input must be 3-D or 4-D, got " + shape_str(x));
  }
  r.rotary = node.attr_int("rotary_embedding_dim", 0);
  if (r.rotary == 0) r.rotary = r.head_size;
  if (r.rotary < 0 || r.rotary > r.head_size || r.rotary % 2)
    fail("rotary_embedding_dim " + std::to_string(r.rotary) + " must be even and at most the head size " +
         std::to_string(r.head_size));
  if (cos != sin) fail("cos_cache " + shape_str(cos) + " and sin_cache " + shape_str(sin) + " differ in shape");
  int64_t half = r.rotary / 2;
  if (pos) {
    if (*pos != Shape{r.batch, r.seq}) fail("position_ids must have shape " + shape_str({r.batch, r.seq}));
    if (cos.size() != 2 || cos[1] != half) fail("cos_cache must have shape [max_position, " + std::to_string(half) + "]");
  } else if (cos != Shape{r.batch, r.seq, half}) {
    fail("without position_ids, cos_cache must have shape " + shape_str({r.batch, r.seq, half}));
  }
  return r;
}

OpDef rotary_embedding_op() {
  OpDef d;
  d.op_type = "RotaryEmbedding";
  d.infer = [](InferContext& c) {
    c.require_input(0, "X");
    c.require_input(1, "cos_cache");
    c.require_input(2, "sin_cache");
    DType t = c.dtype(0);
    if (!is_float(t)) c.unsupported("dtype " + dtype_name(t) + " is not supported");
    if (c.dtype(1) != t || c.dtype(2) != t) c.fail("cos_cache and sin_cache must have the input's dtype");
    if (c.has_input(3) && !is_integer(c.dtype(3))) c.fail("position_ids must be an integer tensor");
    rotary_dims(c.node(), c.shape(0), c.shape(1), c.shape(2), c.has_input(3) ? &c.shape(3) : nullptr);
    c.set_output(0, t, c.shape(0));
  };
  d.eval = [](EvalContext& c) {
    const Tensor& x = c.input(0);
    const Tensor& cos = c.input(1);
    const Tensor& sin = c.input(2);
    const Tensor* pos = c.has_input(3) ? &c.input(3) : nullptr;
    RotaryDims r = rotary_dims(c.node(), x.shape(), cos.shape(), sin.shape(), pos ? &pos->shape() : nullptr);
    const bool interleaved = c.node().attr_int("interleaved", 0) != 0;
    const int64_t half = r.rotary / 2;
    Tensor y = x;  // features past rotary_embedding_dim pass through
    for (int64_t b = 0; b < r.batch; ++b)
      for (int64_t s = 0; s < r.seq; ++s) {
        int64_t cache_row = b * r.seq + s;
        if (pos) {
          cache_row = pos->get_int(b * r.seq + s);
          if (cache_row < 0 || cache_row >= cos.shape()[0])
            c.fail("position id " + std::to_string(cache_row) + " is outside the cache of " +
                   std::to_string(cos.shape()[0]) + " positions");
        }
        for (int64_t h = 0; h < r.heads; ++h) {
          int64_t base = r.is_3d ? ((b * r.seq + s) * r.heads + h) * r.head_size
                                 : ((b * r.heads + h) * r.seq + s) * r.head_size;
          for (int64_t p = 0; p < half; ++p) {
            double cv = cos.get_double(cache_row * half + p), sv = sin.get_double(cache_row * half + p);
            int64_t i1 = base + (interleaved ? 2 * p : p);
            int64_t i2 = base + (interleaved ? 2 * p + 1 : p + half);
            double x1 = x.get_double(i1), x2 = x.get_double(i2);
            y.set_double(i1, cv * x1 - sv * x2);
            y.set_double(i2, sv * x1 + cv * x2);
          }
        }
      }
    c.set_output(0, std::move(y));
  };
  // Per rotated pair: 4 multiplies and 2 adds.
  d.flops = [](const NodeShapes& s) {
    const Shape* pos = s.in.size() > 3 && !s.node.inputs[3].empty() ? &s.in[3] : nullptr;
    RotaryDims r = rotary_dims(s.node, s.in.at(0), s.in.at(1), s.in.at(2), pos);
    return 3.0 * static_cast<double>(r.batch * r.seq * r.heads * r.rotary);
  };
  return d;
}

}  // namespace

void register_attention_ops(OpRegistry& r) {
  r.add(attention_op());
  r.add(rotary_embedding_op());
}

}  // namespace kiln::linalg
