/// \file BERT encoders of any size. `kiln zoo bert_base` is the BERT-base configuration below with
/// input_ids as its only input; tests use smaller configurations and the optional inputs.
#pragma once
#include "frontend/zoo/zoo.h"

namespace kiln {

struct BertConfig {
  int64_t layers = 12;
  int64_t hidden = 768;
  int64_t heads = 12;
  int64_t ffn = 3072;
  int64_t vocab = 30522;
  int64_t max_positions = 512;
  int64_t token_types = 2;
  /// Adds a token_type_ids [B,L] int64 input (values < token_types); without it every token is in
  /// segment 0, as in a single-sentence input.
  bool token_type_ids_input = false;
  /// Adds an attention_mask [B,L] int64 input: positions holding 0 are padding and get no attention.
  /// Without it every position attends to every other.
  bool attention_mask_input = false;
};

/// Outputs: last_hidden_state [B,L,hidden] (the encoder's output for every token) and
/// pooler_output [B,hidden] (tanh(dense(first token)), BERT's sentence summary).
/// Uses opts.batch, opts.seq (1..max_positions) and opts.seed.
ModelBuilder build_bert(const BertConfig& config, const ZooOptions& opts);

}  // namespace kiln
