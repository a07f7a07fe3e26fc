// Attention (opset 23/24 scaled dot-product attention) and RotaryEmbedding (opset 23) as tensor
// expressions. Attention works in the 4-D layout [batch, heads, sequence, head_size]; 3-D inputs
// [batch, sequence, heads * head_size] are read through index arithmetic instead of being copied.
#include <cmath>
#include <limits>

#include "scheduler/te/ops/linalg_common.h"

namespace kiln::te {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Attention inputs and outputs, by position.
enum AttnInput { kQ = 0, kK, kV, kMask, kPastKey, kPastValue, kNonpadKvSeqlen };
enum AttnOutput { kY = 0, kPresentKey, kPresentValue, kQkOutput };

struct AttnDims {
  bool is_3d = false;
  int64_t batch = 0, q_heads = 0, kv_heads = 0, q_seq = 0, kv_seq = 0, past_seq = 0, total_seq = 0;
  int64_t head_size = 0, v_head_size = 0;
  int64_t group() const { return q_heads / kv_heads; }  // query heads served by one K/V head
};

// Shape inference validated everything; this only reads the extents back.
AttnDims attention_dims(const LowerContext& c) {
  const Shape &q = c.shape(kQ), &k = c.shape(kK), &v = c.shape(kV);
  AttnDims d;
  d.is_3d = q.size() == 3;
  d.batch = q[0];
  if (d.is_3d) {
    d.q_heads = c.node().attr_int("q_num_heads", 0);
    d.kv_heads = c.node().attr_int("kv_num_heads", 0);
    d.q_seq = q[1];
    d.kv_seq = k[1];
    d.head_size = q[2] / d.q_heads;
    d.v_head_size = v[2] / d.kv_heads;
  } else {
    d.q_heads = q[1];
    d.kv_heads = k[1];
    d.q_seq = q[2];
    d.kv_seq = k[2];
    d.head_size = q[3];
    d.v_head_size = v[3];
  }
  if (c.has_input(kPastKey)) d.past_seq = c.shape(kPastKey)[2];
  d.total_seq = d.past_seq + d.kv_seq;
  return d;
}

// Element [b, h, s, e] of a 3-D or 4-D Q/K/V input, in the 4-D view.
Expr bhsd_at(const TensorRef& t, bool is_3d, int64_t size, const Expr& b, const Expr& h, const Expr& s, const Expr& e) {
  return is_3d ? at(t, {b, s, h * size + e}) : at(t, {b, h, s, e});
}

// present = past ++ current along the sequence axis, [batch, kv_heads, total_seq, size].
TensorRef present_stage(const LowerContext& c, const AttnDims& d, size_t cur, size_t past, int64_t size,
                        const std::string& name) {
  return compute(c.name(name), "injective", c.dtype(cur), {d.batch, d.kv_heads, d.total_seq, size},
                 [&](const std::vector<Expr>& i) {
                   if (!c.has_input(past)) return bhsd_at(c.input(cur), d.is_3d, size, i[0], i[1], i[2], i[3]);
                   Expr from_cur = bhsd_at(c.input(cur), d.is_3d, size, i[0], i[1], i[2] - d.past_seq, i[3]);
                   return select(i[2] < int_imm(d.past_seq), at(c.input(past), i), from_cur);
                 });
}

// The additive bias of score [b, h, i, j]: the attention mask (bool: 0 or -inf; float: its value;
// columns past a short mask: -inf), overridden by -inf where causal or nonpad masking hides key j.
Expr score_bias(const LowerContext& c, const AttnDims& d, DType t, const std::vector<Expr>& idx) {
  const Expr &b = idx[0], &i = idx[2], &j = idx[3];
  const Expr neg_inf = float_imm(-kInf, t);
  Expr bias = float_imm(0, t);
  if (c.has_input(kMask)) {
    const Shape& ms = c.shape(kMask);
    const size_t r = ms.size();
    std::vector<Expr> mi;
    for (size_t k = 0; k + 1 < r; ++k) mi.push_back(ms[k] == 1 ? int_imm(0) : idx[4 - r + k]);
    mi.push_back(j);
    Expr m = at(c.input(kMask), mi);
    Expr value = c.dtype(kMask) == DType::Bool ? select(m, float_imm(0, t), neg_inf) : cast(t, m);
    const int64_t cols = ms[r - 1];
    bias = cols == d.total_seq ? value : select(j < int_imm(cols), value, neg_inf);
  }
  Expr hidden;
  const bool has_nonpad = c.has_input(kNonpadKvSeqlen);
  if (c.node().attr_int("is_causal", 0) != 0) {
    // Aligned bottom-right by the keys before this query block: the past length, or (external cache
    // without past) nonpad_kv_seqlen[b] - q_seq.
    Expr offset = c.has_input(kPastKey) ? int_imm(d.past_seq)
                  : has_nonpad ? at(c.input(kNonpadKvSeqlen), {b}) - d.q_seq
                               : int_imm(0);
    hidden = j > i + offset;
  }
  if (has_nonpad) {
    Expr beyond = j >= at(c.input(kNonpadKvSeqlen), {b});
    hidden = hidden ? (hidden || beyond) : beyond;
  }
  return hidden ? select(hidden, neg_inf, bias) : bias;
}

void lower_attention(LowerContext& c) {
  const Node& n = c.node();
  const AttnDims d = attention_dims(c);
  const DType t = c.dtype(kQ), ct = compute_dtype(t);
  const DType sm = n.has_attr("softmax_precision")
                       ? linalg::dtype_attr(n, "softmax_precision", n.attr_int("softmax_precision", 0))
                       : t;
  const DType smc = compute_dtype(sm);
  const double scale =
      n.has_attr("scale") ? n.attr_float("scale", 1.0) : 1.0 / std::sqrt(static_cast<double>(d.head_size));
  const double softcap = n.attr_float("softcap", 0.0);
  const int64_t mode = n.attr_int("qk_matmul_output_mode", 0);
  const int64_t B = d.batch, H = d.q_heads, S = d.q_seq, T = d.total_seq;
  const Shape scores{B, H, S, T};

  TensorRef keys = present_stage(c, d, kK, kPastKey, d.head_size, "present_key");
  TensorRef values = present_stage(c, d, kV, kPastValue, d.v_head_size, "present_value");
  auto kv_head = [&](const Expr& h) { return floordiv(h, int_imm(d.group())); };

  // Scaled Q K^T, then the soft cap (before masking, so masked-out scores stay -inf).
  TensorRef qk = reduce(c.name("qk"), "matmul", ct, scores, Reducer::Sum, {d.head_size},
                        [&](const std::vector<Expr>& i, const std::vector<Expr>& r) {
                          Expr q = bhsd_at(c.input(kQ), d.is_3d, d.head_size, i[0], i[1], i[2], r[0]);
                          Expr k = at(keys, {i[0], kv_head(i[1]), i[3], r[0]});
                          return cast(ct, q) * cast(ct, k);
                        });
  TensorRef capped = compute(c.name("capped"), "elementwise", ct, scores, [&](const std::vector<Expr>& i) {
    Expr s = at(qk, i) * float_imm(scale, ct);
    if (softcap <= 0) return s;
    return float_imm(softcap, ct) * unary(ExprOp::Tanh, s / float_imm(softcap, ct));
  });
  // Softmax in the requested precision; a row whose every key is masked out attends to nothing.
  TensorRef biased = compute(c.name("biased"), "broadcast", sm, scores, [&](const std::vector<Expr>& i) {
    return cast(sm, cast(smc, at(capped, i)) + score_bias(c, d, smc, i));
  });
  const Shape rows{B, H, S};
  auto row_reduce = [&](const char* name, Reducer red, const TensorRef& in) {
    return reduce(c.name(name), "reduction", smc, rows, red, {T},
                  [&](const std::vector<Expr>& i, const std::vector<Expr>& r) {
                    return cast(smc, at(in, {i[0], i[1], i[2], r[0]}));
                  });
  };
  TensorRef row_max = row_reduce("max", Reducer::Max, biased);
  TensorRef expv = compute(c.name("exp"), "elementwise", smc, scores, [&](const std::vector<Expr>& i) {
    Expr mx = at(row_max, {i[0], i[1], i[2]});
    return select(eq(mx, float_imm(-kInf, smc)), float_imm(0, smc), unary(ExprOp::Exp, cast(smc, at(biased, i)) - mx));
  });
  TensorRef row_sum = row_reduce("sum", Reducer::Sum, expv);
  TensorRef probs = compute(c.name("probs"), "elementwise", sm, scores, [&](const std::vector<Expr>& i) {
    Expr sum = at(row_sum, {i[0], i[1], i[2]});
    return cast(sm, select(sum > float_imm(0, smc), at(expv, i) / sum, float_imm(0, smc)));
  });

  // Y = P V; zero probabilities are skipped like the reference (so inf/NaN in masked V rows stay out).
  const Shape& y_shape = c.out_shape(kY);
  TensorRef y = reduce(c.name(ct == t ? "" : "acc"), "matmul", ct, y_shape, Reducer::Sum, {T},
                       [&](const std::vector<Expr>& i, const std::vector<Expr>& r) {
                         Expr b = i[0], h, s, e;
                         if (d.is_3d) {
                           s = i[1];
                           h = floordiv(i[2], int_imm(d.v_head_size));
                           e = floormod(i[2], int_imm(d.v_head_size));
                         } else {
                           h = i[1];
                           s = i[2];
                           e = i[3];
                         }
                         Expr p = cast(ct, at(probs, {b, h, s, r[0]}));
                         Expr v = cast(ct, at(values, {b, kv_head(h), r[0], e}));
                         return select(binary(ExprOp::Ne, p, float_imm(0, ct)), p * v, float_imm(0, ct));
                       });
  c.set_output(kY, cast_stage(c.name(), y, t));
  c.set_output(kPresentKey, keys);
  c.set_output(kPresentValue, values);
  if (c.has_output(kQkOutput)) {
    const TensorRef& qk_out = mode == 0 || mode == 1 ? capped : mode == 2 ? biased : probs;
    c.set_output(kQkOutput, cast_stage(c.name("qk_output"), qk_out, t));
  }
}

// ---- RotaryEmbedding: rotates pairs of features of each head by position-dependent angles.
// Inputs: X ([batch, heads, seq, head] or [batch, seq, heads * head]), cos_cache, sin_cache, optional
// position_ids [batch, seq]. Without position_ids the caches are [batch, seq, rotary/2], with them
// [max_position, rotary/2].

void lower_rotary_embedding(LowerContext& c) {
  const Node& n = c.node();
  const TensorRef& x = c.input(0);
  const Shape& xs = x->shape;
  const DType t = x->dtype, ct = compute_dtype(t);
  const bool is_3d = xs.size() == 3;
  const int64_t heads = is_3d ? n.attr_int("num_heads", 0) : xs[1];
  const int64_t head_size = is_3d ? xs[2] / heads : xs[3];
  int64_t rotary = n.attr_int("rotary_embedding_dim", 0);
  if (rotary == 0) rotary = head_size;
  const int64_t half = rotary / 2;
  const bool interleaved = n.attr_int("interleaved", 0) != 0;
  const bool has_pos = c.has_input(3);

  c.set_output(0, compute(c.name(), "injective", t, xs, [&](const std::vector<Expr>& i) {
                 // (b, s, head h, feature d) of this element, and x's element at feature f of the same head.
                 Expr b = i[0], s = is_3d ? i[1] : i[2];
                 Expr feat = is_3d ? floormod(i[2], int_imm(head_size)) : i[3];
                 auto x_at = [&](const Expr& f) {
                   std::vector<Expr> j = i;
                   j.back() = is_3d ? i[2] - feat + f : f;
                   return cast(ct, at(x, j));
                 };
                 // Pair p of this feature and whether it is the pair's first member.
                 Expr p = interleaved ? floordiv(feat, int_imm(2)) : select(feat < int_imm(half), feat, feat - half);
                 Expr first = interleaved ? eq(floormod(feat, int_imm(2)), int_imm(0)) : feat < int_imm(half);
                 // Position ids are data: wrapped and clamped into the cache so no read leaves it.
                 std::vector<Expr> ci{b, s, p};
                 if (has_pos) {
                   const int64_t positions = c.shape(1)[0];
                   Expr pos = cast(DType::Int64, at(c.input(3), {b, s}));
                   pos = select(pos < int_imm(0), pos + positions, pos);
                   ci = {min(max(pos, int_imm(0)), int_imm(positions - 1)), p};
                 }
                 Expr cv = cast(ct, at(c.input(1), ci)), sv = cast(ct, at(c.input(2), ci));
                 Expr x1 = x_at(interleaved ? p * 2 : p), x2 = x_at(interleaved ? p * 2 + 1 : p + half);
                 Expr rotated = select(first, cv * x1 - sv * x2, sv * x1 + cv * x2);
                 // Features past rotary_embedding_dim pass through.
                 return cast(t, select(feat < int_imm(rotary), rotated, cast(ct, at(x, i))));
               }));
}

}  // namespace

void register_linalg_attention_lowerings(LoweringRegistry& r) {
  r.add({"Attention", "", lower_attention});
  r.add({"RotaryEmbedding", "", lower_rotary_embedding});
}

}  // namespace kiln::te
