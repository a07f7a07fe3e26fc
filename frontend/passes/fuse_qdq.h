/// \file QDQ models as integer kernels: DequantizeLinear -> Conv -> QuantizeLinear becomes QLinearConv,
/// DequantizeLinear -> MatMul -> QuantizeLinear becomes QLinearMatMul, and DequantizeLinear -> Gemm ->
/// QuantizeLinear (ONNX Runtime's QGemm) a QLinearConv of 1x1 images between two Reshapes. QDQ is the
/// form ONNX Runtime's quantizer (and `kiln quantize`) writes by default, and ONNX Runtime makes this
/// same rewrite (its QDQ transformer) before it runs one, so the rewritten model computes what ONNX
/// Runtime computes: int32 accumulators and its float32 requantization, where the graph as written
/// would compute in float. (Its x86 build does so for uint8 activations; a Conv of int8 activations it
/// keeps in float there, and the two forms can round a near-tie apart: one code in 93,312 of one
/// squeezenet layer, seen with `kiln quantize --activations int8`.) It also keeps the weights int8:
/// shape inference leaves the DequantizeLinear of a weight this pass will fuse unfolded
/// (is_fused_qdq_weight), instead of folding it into a float32 copy four times the size.
///
/// A pattern is fused only when the integer form is exactly what the operator set defines: per-tensor
/// activation scales and zero points, weight scales per tensor or per output channel (per column for
/// MatMul and Gemm), an int32 bias whose scale is x_scale * w_scale (float32, per channel), and a
/// Conv/MatMul/Gemm output read by its QuantizeLinear alone. Anything else keeps its float form.
#pragma once
#include "frontend/ir/graph.h"

namespace kiln {

/// Whether `dq` (a DequantizeLinear of a constant) feeds a pattern fuse_qdq rewrites. Uses the graph's
/// structure and constants only, so it holds before and after shape inference.
bool is_fused_qdq_weight(const Graph& g, const Node& dq);

/// Rewrites every pattern (in the graph itself, not in loop bodies); returns how many. The
/// DequantizeLinear nodes it leaves unread are dead (remove_dead_nodes).
int fuse_qdq(Graph& g);

}  // namespace kiln
