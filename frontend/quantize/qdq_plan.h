/// \file What `kiln quantize` quantizes in a float model, decided from the graph alone (before any
/// calibration): the nodes that get int8 weights, the ReLUs they absorb, and the activations that get
/// a QuantizeLinear -> DequantizeLinear pair with the value whose calibrated range sets its scale.
///
/// The policy is the one whose integer form every runtime agrees on bit for bit:
///   - Conv, Gemm (alpha = beta = 1, no transposed A) and MatMul by a constant matrix are quantized:
///     their activation input, their int8 weight, their int32 bias and their output;
///   - a Relu, or a Clip from 0, that alone reads such an output is absorbed: the output takes the
///     ReLU's range, whose zero point is the lowest code, so saturation does what the ReLU did;
///   - MaxPool, Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Identity and Dropout between quantized
///     values pass the codes through: their outputs take their input's scale, so a runtime may drop
///     the pairs around them and move int8 values instead (exact: they only select and move values);
///   - everything else (Add, Concat, pooling averages, Softmax, ...) computes in float between the
///     pairs, as the float model does, and its output is quantized where a quantized node reads it.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "frontend/ir/graph.h"

namespace kiln {

struct QuantizedNode {
  std::string output;  // the node's first output in the float model: names it across rewrites
  std::string op_type;
  std::string absorbed;    // the output of the Relu or Clip it absorbs; empty when none
  int64_t channel_axis = 0;  // the weight's output-channel axis: the bias's, and per-channel scales'
  bool per_channel = false;
};

struct QdqPlan {
  std::vector<QuantizedNode> nodes;
  /// Activations to quantize, in graph order, each mapped to the value whose range sets its
  /// parameters (itself, or the quantized input a pass-through node copies codes from).
  std::vector<std::string> activations;
  std::map<std::string, std::string> params_from;
};

/// Plans a float model (imported, not necessarily shape-inferred). `per_channel`: weights get a scale
/// per output channel.
QdqPlan plan_qdq(const Graph& g, bool per_channel);

}  // namespace kiln
