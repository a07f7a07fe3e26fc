/// \file Helpers shared by the linalg family's lowering files (matmul, einsum, attention, quantization).
#pragma once
#include <functional>
#include <vector>

#include "frontend/ops/linalg_internal.h"
#include "scheduler/te/ops/broadcast_lowering.h"

namespace kiln::te {

/// The dtype arithmetic on `t` is written in: half types compute in float32 (and are cast back by
/// the caller), every other dtype in itself.
DType compute_dtype(DType t);

/// `n` Int64 zeros: the index of a single-element tensor of rank n.
std::vector<Expr> zero_indices(size_t n);

/// A stage copying `t` into dtype `to` (returns `t` itself when it already has that dtype).
TensorRef cast_stage(const std::string& name, const TensorRef& t, DType to);

/// The value of an operand at its own indices, already in the accumulation dtype.
using OperandFn = std::function<Expr(const std::vector<Expr>& idx)>;

/// The extents of a numpy-style matmul plus which operands were 1-D (their axis is dropped).
struct MatMulShape {
  linalg::MatMulDims d;
  bool a_vector = false, b_vector = false;

  /// The row (m) and column (n) of an output element; Int64 zero for a 1-D operand's missing axis.
  Expr row(const std::vector<Expr>& out_idx) const;
  Expr col(const std::vector<Expr>& out_idx) const;
};
MatMulShape matmul_shape(const Node& node, const Shape& a, const Shape& b);

/// out[batch..., m, n] = sum_k a[batch..., m, k] * b[batch..., k, n] in `acc`, with A's and B's batch
/// axes broadcast; `a` and `b` give operand values at their own (un-broadcast) indices.
TensorRef matmul_accumulate(const std::string& name, DType acc, const MatMulShape& s, const OperandFn& a,
                            const OperandFn& b);

// Each file of the family registers its ops; register_linalg_lowerings (linalg_lowering.cc) calls them.
void register_linalg_quant_lowerings(LoweringRegistry& r);      // linalg_quant_lowering.cc
void register_linalg_attention_lowerings(LoweringRegistry& r);  // linalg_attention_lowering.cc

}  // namespace kiln::te
