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

/// QuantizeLinear (per tensor, 8-bit) of a Concat or a move read by it alone runs before them, on each
/// of their inputs: it maps each element on its own, so it commutes with a Concat and with anything
/// that only selects and places values, and, being monotone, with MaxPool (windows that hold an input
/// element, as drop_qdq_around_moves's). A Dropout (the identity at inference) becomes an Identity.
/// Then a QuantizeLinear of a DequantizeLinear with the same parameters is the codes themselves.
/// Why: ONNX Runtime's quantizer writes a fire module's concat as DequantizeLinear -> Concat ->
/// QuantizeLinear, which computed the concat, and the max pool after it, on float32 values; now each
/// producing conv's epilogue requantizes its codes into the concat's parameters, and the concat and the
/// pool move 8-bit codes, a quarter of the bytes (squeezenet int8: bench/RESULTS.md). Runs before
/// drop_qdq_around_moves. Returns the number of rewrites; the values and nodes it leaves unread are
/// dead (remove_dead_nodes).
int quantize_before_moves(Graph& g);

}  // namespace kiln
