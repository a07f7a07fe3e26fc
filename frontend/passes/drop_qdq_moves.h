/// \file DequantizeLinear -> a move -> QuantizeLinear with the same scale and zero point is the move
/// on the codes: MaxPool, Reshape, Flatten, Transpose, Squeeze, Unsqueeze and Identity only select and
/// place values, dequantization is monotone, and quantizing a dequantized code with its own parameters
/// gives the code back. So the pair goes and the move reads and writes int8, as ONNX Runtime's QDQ
/// transformer does (its "drop QDQ" rule): a quarter of the bytes moved and stored, and no float
/// conversion on either side (mnist-8 as `kiln quantize` writes it: both max pools and the reshape).
/// Runs after fuse_qdq, whose patterns it does not touch.
#pragma once
#include "frontend/ir/graph.h"

namespace kiln {

/// Rewrites every such pattern in the graph itself; returns how many. The DequantizeLinear nodes it
/// leaves unread are dead (remove_dead_nodes).
int drop_qdq_around_moves(Graph& g);

}  // namespace kiln
