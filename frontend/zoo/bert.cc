// bert_base: the BERT-base encoder of Devlin et al. (2019) in inference form, written with the plain
// ONNX ops an exporter emits (Gather, MatMul + Add, Reshape/Transpose, Softmax, LayerNormalization,
// Erf-based GELU) rather than fused contrib ops, so every matrix product is visible to the compiler.
//
// Per token position, with H = hidden, F = ffn, h = heads, d = H / h:
//   embeddings   word[input_ids] + position[0..L) + token_type[ids or 0] -> LayerNorm
//   each layer   q,k,v = x Wq,k,v + b -> [B,h,L,d]; softmax(q k^T / sqrt(d) + mask) v -> [B,L,H]
//                x = LayerNorm(x + dense(attention));  x = LayerNorm(x + dense(gelu(dense(x))))
//   pooler       tanh(dense(x[:, 0]))
#include "frontend/zoo/bert.h"

#include <cmath>

#include "frontend/ir/error.h"
#include "frontend/zoo/weights.h"
#include "frontend/zoo/zoo_models.h"

namespace kiln {
namespace {

/// Writes the graph one block at a time; each method returns the name of the value it produced.
class BertWriter {
 public:
  BertWriter(ModelBuilder& b, const BertConfig& c, const ZooOptions& o)
      : b_(b), c_(c), w_(o.seed), batch_(o.batch), seq_(o.seq) {}

  void write() {
    b_.input("input_ids", DType::Int64, Shape{batch_, seq_});
    if (c_.token_type_ids_input) b_.input("token_type_ids", DType::Int64, Shape{batch_, seq_});
    if (c_.attention_mask_input) b_.input("attention_mask", DType::Int64, Shape{batch_, seq_});
    write_constants();
    std::string mask = c_.attention_mask_input ? additive_mask() : "";
    std::string x = embeddings();
    for (int64_t i = 0; i < c_.layers; ++i) {
      bool last = i + 1 == c_.layers;
      x = encoder_layer(x, "layer" + std::to_string(i), mask, last ? "last_hidden_state" : "");
    }
    pooler(x);
    b_.output("last_hidden_state", DType::Float32, Shape{batch_, seq_, c_.hidden});
    b_.output("pooler_output", DType::Float32, Shape{batch_, c_.hidden});
  }

 private:
  int64_t head_dim() const { return c_.hidden / c_.heads; }

  // Scalars and shapes every layer shares: one initializer each, so they count once as parameters.
  void write_constants() {
    b_.initializer("const.sqrt2", Tensor::scalar_double(DType::Float32, std::sqrt(2.0)));
    b_.initializer("const.one", Tensor::scalar_double(DType::Float32, 1.0));
    b_.initializer("const.half", Tensor::scalar_double(DType::Float32, 0.5));
    b_.initializer("const.score_scale",
                   Tensor::scalar_double(DType::Float32, 1.0 / std::sqrt(static_cast<double>(head_dim()))));
    std::vector<int64_t> split{batch_, seq_, c_.heads, head_dim()}, merged{batch_, seq_, c_.hidden};
    b_.initializer("const.split_heads_shape", Tensor::from_ints(DType::Int64, {4}, split));
    b_.initializer("const.merge_heads_shape", Tensor::from_ints(DType::Int64, {3}, merged));
  }

  // Xavier-uniform: keeps the variance of a linear layer's output equal to its input's, which with
  // LayerNorm after every residual keeps activations near unit scale through all layers.
  Tensor xavier_uniform(Shape shape, int64_t fan_in, int64_t fan_out) {
    double limit = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
    return w_.uniform_tensor(std::move(shape), -limit, limit);
  }

  // Embedding tables: BERT initialises them with standard deviation 0.02; uniform with that spread.
  Tensor embedding_table(int64_t rows) {
    double limit = 0.02 * std::sqrt(3.0);
    return w_.uniform_tensor({rows, c_.hidden}, -limit, limit);
  }

  std::string linear(const std::string& x, const std::string& p, int64_t in, int64_t out) {
    b_.initializer(p + ".weight", xavier_uniform({in, out}, in, out));
    b_.initializer(p + ".bias", w_.uniform_tensor({out}, -0.02, 0.02));
    b_.node("MatMul", {x, p + ".weight"}, {p + ".matmul"});
    b_.node("Add", {p + ".matmul", p + ".bias"}, {p});
    return p;
  }

  /// Normalises over the hidden axis; the result is named `output`, or `p` when that is empty.
  std::string layer_norm(const std::string& x, const std::string& p, const std::string& output = "") {
    std::string y = output.empty() ? p : output;
    b_.initializer(p + ".scale", w_.uniform_tensor({c_.hidden}, 0.9, 1.1));
    b_.initializer(p + ".bias", w_.uniform_tensor({c_.hidden}, -0.05, 0.05));
    b_.node("LayerNormalization", {x, p + ".scale", p + ".bias"}, {y}).attr("axis", int64_t{-1}).attr("epsilon", 1e-12);
    return y;
  }

  // The exact GELU BERT uses: x * 0.5 * (1 + erf(x / sqrt 2)).
  std::string gelu(const std::string& x, const std::string& p) {
    b_.node("Div", {x, "const.sqrt2"}, {p + ".scaled"});
    b_.node("Erf", {p + ".scaled"}, {p + ".erf"});
    b_.node("Add", {p + ".erf", "const.one"}, {p + ".erf_plus_one"});
    b_.node("Mul", {x, p + ".erf_plus_one"}, {p + ".product"});
    b_.node("Mul", {p + ".product", "const.half"}, {p});
    return p;
  }

  // attention_mask [B,L] (1 = token, 0 = padding) -> [B,1,1,L] of 0 / -10000, added to the scores of
  // every head and query so padding keys get no weight. Testing `== 0` rather than computing 1 - mask
  // keeps any non-zero mask value meaning "attend".
  std::string additive_mask() {
    b_.initializer("const.mask_zero", Tensor::scalar_int(DType::Int64, 0));
    b_.initializer("const.mask_penalty", Tensor::scalar_double(DType::Float32, -10000.0));
    b_.initializer("const.mask_axes", Tensor::from_ints(DType::Int64, {2}, std::vector<int64_t>{1, 2}));
    b_.node("Equal", {"attention_mask", "const.mask_zero"}, {"mask.is_padding"});
    b_.node("Cast", {"mask.is_padding"}, {"mask.padding"}).attr("to", int64_t{1});  // FLOAT
    b_.node("Mul", {"mask.padding", "const.mask_penalty"}, {"mask.penalty"});
    b_.node("Unsqueeze", {"mask.penalty", "const.mask_axes"}, {"mask.additive"});
    return "mask.additive";
  }

  std::string embeddings() {
    b_.initializer("embeddings.word", embedding_table(c_.vocab));
    b_.initializer("embeddings.position", embedding_table(c_.max_positions));
    b_.initializer("embeddings.token_type", embedding_table(c_.token_types));
    std::vector<int64_t> positions(static_cast<size_t>(seq_));
    for (int64_t i = 0; i < seq_; ++i) positions[static_cast<size_t>(i)] = i;
    b_.initializer("embeddings.position_ids", Tensor::from_ints(DType::Int64, {seq_}, positions));
    b_.node("Gather", {"embeddings.word", "input_ids"}, {"embeddings.words"});
    // Positions are the same for every sequence: [L,H], broadcast over the batch.
    b_.node("Gather", {"embeddings.position", "embeddings.position_ids"}, {"embeddings.positions"});
    if (c_.token_type_ids_input) {
      b_.node("Gather", {"embeddings.token_type", "token_type_ids"}, {"embeddings.token_types"});
    } else {
      b_.initializer("embeddings.segment_zero", Tensor::from_ints(DType::Int64, {1}, std::vector<int64_t>{0}));
      b_.node("Gather", {"embeddings.token_type", "embeddings.segment_zero"}, {"embeddings.token_types"});
    }
    b_.node("Add", {"embeddings.words", "embeddings.positions"}, {"embeddings.word_and_position"});
    b_.node("Add", {"embeddings.word_and_position", "embeddings.token_types"}, {"embeddings.sum"});
    return layer_norm("embeddings.sum", "embeddings.norm");
  }

  // [B,L,H] -> [B,h,L,d], or [B,h,d,L] for the keys so that q k^T is a plain batched MatMul.
  std::string split_heads(const std::string& x, bool transpose_for_keys) {
    b_.node("Reshape", {x, "const.split_heads_shape"}, {x + ".heads"});
    std::vector<int64_t> perm = transpose_for_keys ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3};
    b_.node("Transpose", {x + ".heads"}, {x + ".by_head"}).attr("perm", perm);
    return x + ".by_head";
  }

  std::string self_attention(const std::string& x, const std::string& p, const std::string& mask) {
    std::string q = split_heads(linear(x, p + ".query", c_.hidden, c_.hidden), false);
    std::string k = split_heads(linear(x, p + ".key", c_.hidden, c_.hidden), true);
    std::string v = split_heads(linear(x, p + ".value", c_.hidden, c_.hidden), false);
    b_.node("MatMul", {q, k}, {p + ".scores"});
    b_.node("Mul", {p + ".scores", "const.score_scale"}, {p + ".scaled_scores"});
    std::string scores = p + ".scaled_scores";
    if (!mask.empty()) {
      b_.node("Add", {scores, mask}, {p + ".masked_scores"});
      scores = p + ".masked_scores";
    }
    b_.node("Softmax", {scores}, {p + ".probs"}).attr("axis", int64_t{-1});
    b_.node("MatMul", {p + ".probs", v}, {p + ".context"});
    b_.node("Transpose", {p + ".context"}, {p + ".context_by_token"}).attr("perm", std::vector<int64_t>{0, 2, 1, 3});
    b_.node("Reshape", {p + ".context_by_token", "const.merge_heads_shape"}, {p + ".merged"});
    return linear(p + ".merged", p + ".output", c_.hidden, c_.hidden);
  }

  std::string encoder_layer(const std::string& x, const std::string& p, const std::string& mask,
                            const std::string& output) {
    std::string attention = self_attention(x, p + ".attention", mask);
    b_.node("Add", {x, attention}, {p + ".attention_residual"});
    std::string y = layer_norm(p + ".attention_residual", p + ".attention_norm");
    std::string up = gelu(linear(y, p + ".intermediate", c_.hidden, c_.ffn), p + ".gelu");
    std::string down = linear(up, p + ".ffn_output", c_.ffn, c_.hidden);
    b_.node("Add", {y, down}, {p + ".ffn_residual"});
    return layer_norm(p + ".ffn_residual", p + ".ffn_norm", output);
  }

  // BERT's sentence summary: the first ([CLS]) token's state through dense + tanh.
  void pooler(const std::string& x) {
    b_.initializer("pooler.first_token", Tensor::scalar_int(DType::Int64, 0));
    b_.node("Gather", {x, "pooler.first_token"}, {"pooler.first"}).attr("axis", int64_t{1});
    std::string dense = linear("pooler.first", "pooler.dense", c_.hidden, c_.hidden);
    b_.node("Tanh", {dense}, {"pooler_output"});
  }

  ModelBuilder& b_;
  const BertConfig& c_;
  WeightInit w_;
  int64_t batch_, seq_;
};

}  // namespace

ModelBuilder build_bert(const BertConfig& config, const ZooOptions& opts) {
  if (opts.batch < 1) throw Error("bert: --batch must be at least 1, got " + std::to_string(opts.batch));
  if (opts.seq < 1 || opts.seq > config.max_positions)
    throw Error("bert: --seq must be in 1.." + std::to_string(config.max_positions) + ", got " +
                std::to_string(opts.seq));
  if (config.layers < 1) throw Error("bert: needs at least one layer");
  if (config.heads < 1 || config.hidden % config.heads != 0)
    throw Error("bert: hidden size " + std::to_string(config.hidden) + " is not a multiple of " +
                std::to_string(config.heads) + " heads");
  ModelBuilder b("bert", 17);
  BertWriter(b, config, opts).write();
  return b;
}

ModelBuilder build_bert_base(const ZooOptions& opts) { return build_bert(BertConfig{}, opts); }

}  // namespace kiln
