/// \file Small models for the partition and task tests: the fusion patterns the partitioner must
/// get right (conv + bias + ReLU, matmul + bias + GELU, attention scores into Softmax, residual
/// blocks), built with ModelBuilder and brought through the frontend like `kiln` does.
#pragma once
#include <string>

#include "frontend/ir/graph.h"
#include "frontend/onnx/model_builder.h"
#include "frontend/zoo/zoo.h"

namespace kiln::testing {

/// Import + bind + infer + prune, from the builder's bytes.
Graph load_built(const ModelBuilder& b);
/// A zoo model through the same frontend steps.
Graph load_zoo(const std::string& name, const ZooOptions& opts);

/// x[1,3,8,8] -> Conv(bias, pad 1) -> Relu -> y.
ModelBuilder conv_bias_relu_model();
/// x[2,8] -> MatMul -> Add(bias) -> GELU as Div/Erf/Add/Mul/Mul (BERT's export) -> y.
ModelBuilder matmul_add_gelu_model();
/// q[1,2,4,8], k[1,2,8,4], v[1,2,4,8]: MatMul -> Mul(scale) -> Add(mask) -> Softmax -> MatMul.
ModelBuilder attention_model();

/// One residual block with a 1x1-conv shortcut: conv3x3 -> relu -> conv3x3, + conv1x1(x), relu.
struct BlockSpec {
  std::string prefix;          // node and value names start with it
  std::string input;           // a graph input [1, 4, size, size]
  int64_t size = 6;
  bool shortcut_first = false;  // list the shortcut conv's node before the main branch's
  uint64_t seed = 1;           // weights differ between blocks
};
/// A graph of independent residual blocks, one graph input and output per block, listed in order.
ModelBuilder residual_blocks_model(const std::vector<BlockSpec>& blocks);

/// A small transformer layer: LayerNorm(x + attention(x)) with one head, then a GELU feed-forward
/// and a second residual LayerNorm; x[1,4,8].
ModelBuilder tiny_transformer_model();

}  // namespace kiln::testing
