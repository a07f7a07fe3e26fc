/// \file Helpers shared by the linalg family's files (matmul, einsum, attention, quantization). Not for
/// use by other op families: axes_and_broadcast.h holds what is shared across families.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/ops/axes_and_broadcast.h"

namespace kiln::linalg {

/// The shapes of a numpy-style matmul: operands of rank >= 1, 1-D operands promoted to a row (A) or a
/// column (B) and the promoted axis dropped from the result, leading (batch) axes broadcast.
struct MatMulDims {
  Shape out;      // the result's shape
  Shape batch;    // broadcast batch shape (the result's leading axes, before 1-D axes are dropped)
  Shape a_batch;  // A's own batch axes
  Shape b_batch;  // B's own batch axes
  int64_t m = 1, k = 1, n = 1;
  int64_t batch_count() const { return num_elements(batch); }
};

/// Throws Error naming `node` when the shapes cannot be multiplied.
MatMulDims matmul_dims(const Node& node, const Shape& a, const Shape& b);

/// out[p, m, n] = sum_k a[p, m, k] * b[p, k, n] over the broadcast batch p, with a and b laid out
/// row-major in their own (un-broadcast) shapes. Integers wrap as two's complement (no UB).
std::vector<double> batched_matmul(const MatMulDims& d, const std::vector<double>& a, const std::vector<double>& b);
std::vector<int64_t> batched_matmul(const MatMulDims& d, const std::vector<int64_t>& a,
                                    const std::vector<int64_t>& b);

/// Two's-complement arithmetic on int64 without signed-overflow UB.
inline int64_t wrapping_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
inline int64_t wrapping_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}

/// Rounds half to even (numpy's rint), independent of the current floating-point rounding mode.
double round_half_to_even(double v);

/// An int32 accumulator requantized as ONNX Runtime does it with float32 scales (MLAS's requantize
/// output): the accumulator rounded to float32, times the float32 multiplier in float32, rounded half to
/// even, plus the zero point. ONNX's Python reference multiplies in float64 instead; the two differ only
/// where the float32 product lands on the other side of a .5 (no node test has such a case), and kiln
/// follows ONNX Runtime, the runtime its users compare with (issue 22). Not saturated.
double requantize_float32(int64_t acc, float multiplier, double zero_point);

/// The smallest and largest value of an integer dtype, as doubles (for saturating quantization).
double integer_min(DType t);
double integer_max(DType t);

/// The dtype numpy computes `a op b` in for two arrays of these dtypes, restricted to what the
/// quantized ops need: float64 wins, an integer operand promotes to float64, two different half
/// types or a half type with float32 give float32.
DType promoted_float_dtype(DType a, DType b);

/// The DType an ONNX dtype attribute names; fails naming the node and attribute when kiln cannot
/// compute in it.
DType dtype_attr(const Node& node, const std::string& attr, int64_t value);

// Each file of the family registers its ops; register_linalg_ops (linalg_ops.cc) calls them all.
void register_einsum_op(OpRegistry& r);      // linalg_einsum.cc: Einsum
void register_attention_ops(OpRegistry& r);  // linalg_attention.cc: Attention, RotaryEmbedding
void register_quant_ops(OpRegistry& r);      // linalg_quant.cc: QuantizeLinear, DequantizeLinear,
                                             // DynamicQuantizeLinear, MatMulInteger, QLinearMatMul

}  // namespace kiln::linalg
